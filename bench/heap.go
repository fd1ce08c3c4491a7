package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

// heap measures the live heap per extra in-flight message (issue 11) by
// message size: bench/heapprobe (the pipes runtime in process, a record
// per message to the HTTP target) holds lo, then hi, batches of 10 at a
// target that answers after a minute; once every message has reached the
// target, the probe forces a garbage collection and reports HeapAlloc.
// The difference over the difference in messages is what one more
// message in flight holds: its body, its record, the request that
// carries it, its delivery and attributes.
func (h *harness) heap(ctx context.Context, res *Results) error {
	var out []HeapResult
	for _, l := range heapLevels {
		lo, hi := l.lo, l.hi
		if h.o.quick {
			lo, hi = l.quickLo, l.quickHi
		}
		r := HeapResult{Size: l.size, LoMessages: lo * 10, HiMessages: hi * 10}
		var err error
		if r.LoHeap, err = h.heapAt(ctx, l.size, lo); err != nil {
			return err
		}
		if r.HiHeap, err = h.heapAt(ctx, l.size, hi); err != nil {
			return err
		}
		r.PerMessage = float64(r.HiHeap-r.LoHeap) / float64(r.HiMessages-r.LoMessages)
		r.Target = 1.2*float64(l.size) + 2048
		progress(fmt.Sprintf("heap: %d B messages: %d B live heap at %d in flight, %d B at %d: %.0f B per extra message (target %.0f)",
			l.size, r.LoHeap, r.LoMessages, r.HiHeap, r.HiMessages, r.PerMessage, r.Target))
		out = append(out, r)
	}
	res.Heap = out
	return nil
}

// heapAt runs the probe with conc batches of size-byte messages held at the
// target and returns its live heap.
func (h *harness) heapAt(ctx context.Context, size, conc int) (uint64, error) {
	n := conc * 10
	url, err := h.srv.createQueue(ctx, "bench-heap", 300*time.Second)
	if err != nil {
		return 0, err
	}
	defer h.srv.deleteQueue(url)
	if err := h.srv.fill(ctx, url, 0, n, size); err != nil {
		return 0, err
	}
	h.tgt.reset(time.Minute)
	defer h.tgt.reset(0)
	label := fmt.Sprintf("heap-%d-%d", size, conc)
	file := filepath.Join(h.tmp, label+".yaml")
	spec := pipeSpec{queueURL: url, wait: time.Second, maxConc: conc, initConc: conc, record: true, targetURL: h.tgt.url}
	if err := os.WriteFile(file, []byte(pipelineYAML(h.srv.endpoint, spec)), 0o644); err != nil {
		return 0, fmt.Errorf("writing the pipeline file: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := []string{h.heapprobeBin, "-f", file, "-addr", addr}
	if h.o.heapProfiles != "" {
		args = append(args, "-memprofilerate", "512")
	}
	c, err := h.kids.start("heapprobe", filepath.Join(h.tmp, label+".log"), nil, args...)
	if err != nil {
		return 0, err
	}
	// Killed, not stopped: the held batches would wait out the target.
	defer func() { _ = c.cmd.Process.Kill(); <-c.done }()
	deadline := time.Now().Add(2 * time.Minute)
	for h.tgt.arrived.Load() < int64(n) {
		if time.Now().After(deadline) || c.exited() {
			return 0, fmt.Errorf("heap probe: %d of %d messages reached the target: %s", h.tgt.arrived.Load(), n, h.logTail(label))
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
	if err := sleep(ctx, time.Second); err != nil { // the last requests' answers settle in
		return 0, err
	}
	if h.o.heapProfiles != "" {
		if err := saveProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", filepath.Join(h.o.heapProfiles, label+".pprof")); err != nil {
			return 0, err
		}
	}
	best := uint64(0)
	for range 3 {
		v, err := probeHeap(ctx, "http://"+addr+"/heap")
		if err != nil {
			return 0, err
		}
		if best == 0 || v < best {
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

// probeHeap asks the probe for its live heap.
func probeHeap(ctx context.Context, url string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("asking the heap probe: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("asking the heap probe: %w", err)
	}
	defer resp.Body.Close()
	var v struct {
		HeapAlloc uint64 `json:"heap_alloc"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("decoding the heap probe's answer: %w", err)
	}
	return v.HeapAlloc, nil
}
