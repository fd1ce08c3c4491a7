package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// microFile is the `go test -bench` output the harness reports on, kept
// in the results folder (see the README for the command).
const microFile = "micro.txt"

// microBench is one benchmark's values by unit (ns/op, B/op, allocs/op,
// custom metrics), one per -count run.
type microBench struct {
	name   string
	values map[string][]float64
}

// parseBench reads `go test -bench` output; lines that are not benchmark
// results are skipped. Benchmarks keep their first-seen order.
func parseBench(r io.Reader) ([]microBench, error) {
	var out []microBench
	index := map[string]int{}
	pkg := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(rest), "github.com/pipesproject/pipes/")
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if pkg != "" {
			name = pkg + "." + strings.TrimPrefix(name, "Benchmark")
		}
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, microBench{name: name, values: map[string][]float64{}})
		}
		for j := 2; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				out[i].values[f[j+1]] = append(out[i].values[f[j+1]], v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading benchmark output: %w", err)
	}
	return out, nil
}

// microTargets are the per-benchmark targets on the median ns/op:
// matching a 5-field pattern (the body decode is measured apart, and the
// report gives the ratio).
var microTargets = map[string]float64{
	"filter.MatchDecodedBody": 2000,
}

// writeMicro prints the medians of dir/micro.txt as a Markdown table; a
// missing file prints nothing.
func writeMicro(w io.Writer, dir string) error {
	f, err := os.Open(filepath.Join(dir, microFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the micro-benchmarks: %w", err)
	}
	defer f.Close()
	bs, err := parseBench(f)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("\nMicro-benchmarks (medians of `go test -run '^$' -bench . -benchmem -count 6 ./source/sqs/ ./filter/ ./template/ ./pipe/ ./internal/kit/batching/ ./target/httptarget/ ./internal/h1/`):\n\n")
	b.WriteString("| Benchmark | ns/op | B/op | allocs/op | other | Target | Met |\n|---|---|---|---|---|---|---|\n")
	for _, bm := range bs {
		var other []string
		units := make([]string, 0, len(bm.values))
		for u := range bm.values {
			units = append(units, u)
		}
		sort.Strings(units)
		for _, u := range units {
			switch u {
			case "ns/op", "B/op", "allocs/op", "MB/s":
			default:
				other = append(other, fmt.Sprintf("%.4g %s", median(bm.values[u]), u))
			}
		}
		ns := median(bm.values["ns/op"])
		target, met := "", ""
		if t, ok := microTargets[bm.name]; ok {
			target = fmt.Sprintf("≤ %.0f ns", t)
			met = map[bool]string{true: "yes", false: "**no**"}[ns <= t]
		}
		fmt.Fprintf(&b, "| %s | %.4g | %.4g | %.4g | %s | %s | %s |\n", bm.name, ns, median(bm.values["B/op"]),
			median(bm.values["allocs/op"]), strings.Join(other, ", "), target, met)
	}
	_, err = io.WriteString(w, b.String())
	return err
}
