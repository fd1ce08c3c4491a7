package procs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func burn(stop *atomic.Bool) {
	for !stop.Load() {
		work(time.Millisecond)
	}
}

// taskset sets the CPU affinity of every thread of this process to mask
// (hex), or reads it when mask is empty.
func taskset(mask string) (string, error) {
	pid := fmt.Sprint(os.Getpid())
	args := []string{"-a", "-p", mask, pid}
	if mask == "" {
		args = []string{"-p", pid}
	}
	out, err := exec.Command("taskset", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("taskset %s: %w: %s", strings.Join(args, " "), err, out)
	}
	// "pid 123's current affinity mask: 3"
	f := strings.Fields(string(out))
	return f[len(f)-1], nil
}

// TestCeilingFollowsAffinity: the CPUs the process may use shrink from two
// to one (as an in-place pod resize or a cpuset change would). The
// runtime follows within a second or so, and so does GOMAXPROCS under Run,
// busy or idle; after Run it is the runtime's automatic value again. The
// sizer that read its ceiling once held two, and restored two.
func TestCeilingFollowsAffinity(t *testing.T) {
	if testing.Short() {
		t.Skip("about 15 s")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	orig, err := taskset("")
	if err != nil {
		t.Skipf("cannot read the CPU affinity: %v", err)
	}
	t.Cleanup(func() {
		taskset(orig)
		runtime.SetDefaultGOMAXPROCS()
	})
	for _, tc := range []struct {
		name  string
		procs bool
		busy  bool
	}{
		{"without the sizer", false, true},
		{"with the sizer, busy", true, true},
		{"with the sizer, idle", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := taskset("3"); err != nil {
				t.Skip(err)
			}
			runtime.SetDefaultGOMAXPROCS()
			time.Sleep(1500 * time.Millisecond)
			start := runtime.GOMAXPROCS(0)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if tc.procs {
				wg.Go(func() { Run(ctx, func(string) string { return "" }, slog.New(slog.DiscardHandler)) })
			}
			var stop atomic.Bool
			if tc.busy {
				for range 4 {
					wg.Go(func() { burn(&stop) })
				}
			}
			time.Sleep(1500 * time.Millisecond)
			if _, err := taskset("1"); err != nil {
				t.Skip(err)
			}
			time.Sleep(4 * time.Second)
			during := runtime.GOMAXPROCS(0)
			stop.Store(true)
			cancel()
			wg.Wait()
			after := runtime.GOMAXPROCS(0)
			taskset("3")
			t.Logf("start %d, after the affinity shrank to 1 CPU: %d, after Run ended: %d", start, during, after)
			if during != 1 || after != 1 {
				t.Errorf("GOMAXPROCS %d while Run ran, %d after, on a process allowed one CPU", during, after)
			}
		})
	}
}
