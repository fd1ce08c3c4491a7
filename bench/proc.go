package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process the harness started (pipes or the minimal consumer).
type child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// children tracks the running children so that they are killed when the
// harness exits early. Safe for concurrent use.
type children struct {
	// pipesEnv is added to the environment of the pipes runner (-pipes-env).
	pipesEnv []string

	mu   sync.Mutex
	live map[*child]struct{}
}

// start runs a child with the AWS environment the local server needs, and
// env (K=V) after it; its stdout and stderr go to logPath.
func (cs *children) start(name, logPath string, env []string, args ...string) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating the log of %s: %w", name, err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=x", "AWS_SECRET_ACCESS_KEY=x", "AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true", "AWS_PROFILE=", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	if name == "pipes" {
		cmd.Env = append(cmd.Env, cs.pipesEnv...)
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, done: make(chan struct{})}
	cs.mu.Lock()
	if cs.live == nil {
		cs.live = map[*child]struct{}{}
	}
	cs.live[c] = struct{}{}
	cs.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		_ = logf.Close()
		cs.mu.Lock()
		delete(cs.live, c)
		cs.mu.Unlock()
		close(c.done)
	}()
	return c, nil
}

// killAll kills every child still running.
func (cs *children) killAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for c := range cs.live {
		_ = c.cmd.Process.Kill()
	}
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to timeout, then kills the child.
func (c *child) stop(timeout time.Duration) {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// cpuSeconds is the user+system CPU time of an ended child.
func (c *child) cpuSeconds() float64 {
	st := c.cmd.ProcessState
	if st == nil {
		return 0
	}
	return st.UserTime().Seconds() + st.SystemTime().Seconds()
}

// usage is an ended child's user and system CPU seconds and its context
// switches (voluntary and not, all threads): where its CPU went.
func (c *child) usage() (user, sys float64, switches int64) {
	st := c.cmd.ProcessState
	if st == nil {
		return 0, 0, 0
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		switches = ru.Nvcsw + ru.Nivcsw
	}
	return st.UserTime().Seconds(), st.SystemTime().Seconds(), switches
}

// procCPU reads a running process's user+system CPU seconds from
// /proc/<pid>/stat.
func procCPU(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of %d: %w", pid, err)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("reading the CPU time of %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("reading the CPU time of %d: short stat", pid)
	}
	// Fields after the command: state is f[0]; utime is field 14 overall, f[11].
	ut, err1 := strconv.ParseFloat(f[11], 64)
	stt, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("reading the CPU time of %d: bad numbers", pid)
	}
	return (ut + stt) / 100, nil // USER_HZ is 100 on Linux
}

// procStatusKB reads a "Key:  N kB" line of /proc/<pid>/status, in bytes.
func procStatusKB(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the status of %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			fs := strings.Fields(rest)
			if len(fs) > 0 {
				n, err := strconv.ParseInt(fs[0], 10, 64)
				return n * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("reading the status of %d: no %s", pid, key)
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// metrics is one scrape of a Prometheus text exposition.
type metrics []sample

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads url (a /metrics endpoint) with a 5 s timeout.
func scrape(ctx context.Context, url string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics parses the Prometheus text format, enough for the series
// pipes serves (label values without commas or escaped quotes).
func parseMetrics(r io.Reader) (metrics, error) {
	var out metrics
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := sample{name: line[:sp], value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			labels := strings.TrimSuffix(s.name[i+1:], "}")
			s.name = s.name[:i]
			s.labels = map[string]string{}
			for _, kv := range strings.Split(labels, ",") {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[k] = strings.Trim(v, `"`)
				}
			}
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading metrics: %w", err)
	}
	return out, nil
}

// sum adds the values of the series called name whose labels include
// every pair of want (key, value, key, value...).
func (m metrics) sum(name string, want ...string) float64 {
	total := 0.0
next:
	for _, s := range m {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// byLabel returns the values of name's series by the value of label.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == name {
			out[s.labels[label]] += s.value
		}
	}
	return out
}
