package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// heapLevel is one size of the live-heap measurement: the batches held at
// the target at the low and the high level.
type heapLevel struct {
	size    int
	lo, hi  int // batches of 10
	quickLo int
	quickHi int
}

var heapLevels = []heapLevel{
	{size: 200, lo: 20, hi: 200, quickLo: 5, quickHi: 40},
	{size: 4096, lo: 20, hi: 200, quickLo: 5, quickHi: 40},
	{size: 100 << 10, lo: 5, hi: 30, quickLo: 2, quickHi: 8},
}

// heap measures the memory per extra in-flight message (issues 11 and 20)
// by message size: bench/heapprobe (the pipes runtime in process, a record
// per message to the HTTP target) holds lo, then hi, batches of 10 at a
// target that answers after a minute, on a queue with the default 30 s
// visibility so that the heartbeat extends the held messages as it does in
// production; once every message has reached the target, the probe forces
// a garbage collection and reports HeapAlloc and the goroutine stacks
// (StackInuse), once the heartbeat has extended every held message. The
// difference over the difference in messages is what
// one more message in flight holds: its body, its record, the request that
// carries it, its delivery and attributes (heap), and the goroutines that
// wait for it (stacks).
func (h *harness) heap(ctx context.Context, res *Results) error {
	var out []HeapResult
	for _, l := range heapLevels {
		if !slices.Contains(h.o.heapSizes, l.size) {
			// Not measured this time: an earlier run's figure stays.
			if i := slices.IndexFunc(res.Heap, func(r HeapResult) bool { return r.Size == l.size }); i >= 0 {
				out = append(out, res.Heap[i])
			}
			continue
		}
		lo, hi := l.lo, l.hi
		if h.o.quick {
			lo, hi = l.quickLo, l.quickHi
		}
		r := HeapResult{Size: l.size, LoMessages: lo * 10, HiMessages: hi * 10, Visibility: heapVisibility.String()}
		loM, err := h.heapAt(ctx, l.size, lo)
		if err != nil {
			return err
		}
		hiM, err := h.heapAt(ctx, l.size, hi)
		if err != nil {
			return err
		}
		r.LoHeap, r.HiHeap = loM.HeapAlloc, hiM.HeapAlloc
		r.LoStacks, r.HiStacks = loM.StackInuse, hiM.StackInuse
		r.LoGoroutines, r.HiGoroutines = loM.Goroutines, hiM.Goroutines
		extra := float64(r.HiMessages - r.LoMessages)
		r.PerMessage = float64(int64(r.HiHeap)-int64(r.LoHeap)) / extra
		r.StacksPerMessage = float64(int64(r.HiStacks)-int64(r.LoStacks)) / extra
		r.TotalPerMessage = r.PerMessage + r.StacksPerMessage
		r.GoroutinesPerMessage = float64(int64(r.HiGoroutines)-int64(r.LoGoroutines)) / extra
		r.Target = 1.2*float64(l.size) + 2048
		r.TotalTarget = 1.2*float64(l.size) + 3072
		progress(fmt.Sprintf("heap: %d B messages: %.0f B heap + %.0f B stacks = %.0f B per extra message (target %.0f), %.2f goroutines; heap %d → %d B, stacks %d → %d B, goroutines %d → %d at %d → %d in flight",
			l.size, r.PerMessage, r.StacksPerMessage, r.TotalPerMessage, r.TotalTarget, r.GoroutinesPerMessage,
			r.LoHeap, r.HiHeap, r.LoStacks, r.HiStacks, r.LoGoroutines, r.HiGoroutines, r.LoMessages, r.HiMessages))
		out = append(out, r)
	}
	res.Heap = out
	return nil
}

// parseHeapSizes reads -heap-sizes: a comma-separated list of the sizes
// of heapLevels.
func parseHeapSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || !slices.ContainsFunc(heapLevels, func(l heapLevel) bool { return l.size == n }) {
			return nil, fmt.Errorf("-heap-sizes: %q is not one of 200, 4096, 102400", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-heap-sizes: no size in %q", s)
	}
	return out, nil
}

// heapVisibility is the visibility timeout of the heap scenario's queue:
// SQS's default, shorter than the target's minute, so the heartbeat runs.
const heapVisibility = 30 * time.Second

// heapAt runs the probe with conc batches of size-byte messages held at the
// target and returns its live heap and stacks.
func (h *harness) heapAt(ctx context.Context, size, conc int) (probeMemory, error) {
	n := conc * 10
	url, err := h.srv.createQueue(ctx, "bench-heap", heapVisibility)
	if err != nil {
		return probeMemory{}, err
	}
	defer h.srv.deleteQueue(url)
	if err := h.srv.fill(ctx, url, 0, n, size); err != nil {
		return probeMemory{}, err
	}
	h.tgt.reset(time.Minute)
	defer h.tgt.reset(0)
	label := fmt.Sprintf("heap-%d-%d", size, conc)
	file := filepath.Join(h.tmp, label+".yaml")
	spec := pipeSpec{queueURL: url, wait: time.Second, maxConc: conc, initConc: conc, record: true, targetURL: h.tgt.url}
	if err := os.WriteFile(file, []byte(pipelineYAML(h.srv.endpoint, spec)), 0o644); err != nil {
		return probeMemory{}, fmt.Errorf("writing the pipeline file: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return probeMemory{}, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{h.heapprobeBin, "-f", file, "-addr", addr}
	if h.o.heapProfiles != "" {
		args = append(args, "-memprofilerate", "512")
	}
	c, err := h.kids.start("heapprobe", filepath.Join(h.tmp, label+".log"), nil, args...)
	if err != nil {
		return probeMemory{}, err
	}
	// Killed, not stopped: the held batches would wait out the target.
	defer func() { _ = c.cmd.Process.Kill(); <-c.done }()
	deadline := time.Now().Add(2 * time.Minute)
	for h.tgt.arrived.Load() < int64(n) {
		if time.Now().After(deadline) || c.exited() {
			return probeMemory{}, fmt.Errorf("heap probe: %d of %d messages reached the target: %s", h.tgt.arrived.Load(), n, h.logTail(label))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return probeMemory{}, err
		}
	}
	// The heartbeat extends each held message once its lease is within a
	// third of the visibility from its end (20 s after the receive): what
	// the extensions keep is counted too.
	for {
		m, err := scrape(ctx, "http://"+addr+"/metrics")
		if err == nil && m.sum("pipes_visibility_extended_total") >= float64(n) {
			break
		}
		if time.Now().After(deadline) || c.exited() {
			return probeMemory{}, fmt.Errorf("heap probe: the heartbeat did not extend the %d held messages: %v: %s", n, err, h.logTail(label))
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return probeMemory{}, err
		}
	}
	if err := sleep(ctx, time.Second); err != nil { // the last calls' answers settle in
		return probeMemory{}, err
	}
	if h.o.heapProfiles != "" {
		if err := saveProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", filepath.Join(h.o.heapProfiles, label+".pprof")); err != nil {
			return probeMemory{}, err
		}
		if err := saveProfile(ctx, "http://"+addr+"/debug/pprof/goroutine", filepath.Join(h.o.heapProfiles, label+".goroutine.pprof")); err != nil {
			return probeMemory{}, err
		}
		if err := saveProfile(ctx, "http://"+addr+"/debug/pprof/goroutine?debug=1", filepath.Join(h.o.heapProfiles, label+".goroutine.txt")); err != nil {
			return probeMemory{}, err
		}
	}
	var best probeMemory
	for i := range 3 {
		v, err := probeHeap(ctx, "http://"+addr+"/heap")
		if err != nil {
			return probeMemory{}, err
		}
		if i == 0 || v.HeapAlloc+v.StackInuse < best.HeapAlloc+best.StackInuse {
			best = v
		}
	}
	return best, nil
}

// saveProfile writes what url answers to file.
func saveProfile(ctx context.Context, url, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fetching a profile: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching a profile: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("fetching a profile: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("saving a profile: %w", err)
	}
	return os.WriteFile(file, data, 0o644)
}

// probeMemory is what the probe's /heap answers.
type probeMemory struct {
	HeapAlloc  uint64 `json:"heap_alloc"`
	StackInuse uint64 `json:"stack_inuse"`
	Goroutines uint64 `json:"goroutines"`
}

// probeHeap asks the probe for its live heap and stacks.
func probeHeap(ctx context.Context, url string) (probeMemory, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return probeMemory{}, fmt.Errorf("asking the heap probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return probeMemory{}, fmt.Errorf("asking the heap probe: %w", err)
	}
	defer resp.Body.Close()
	var v probeMemory
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return probeMemory{}, fmt.Errorf("decoding the heap probe's answer: %w", err)
	}
	return v, nil
}
