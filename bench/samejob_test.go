package main

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTheReportPrintsPipesOverEachSameJobVariantAndTheBestOverHTTPAndTLS(t *testing.T) {
	r, err := loadResults(filepath.Join("testdata", "samejob"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := writeReport(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		// The rows of issue 11, as before.
		"| Same job, concurrency 4: CPU µs per msg, same-job consumer (bench/samejob) | 90.0 (92.0 with start-up and stop; 2900 msgs/s) |  |  |",
		"| Same job, concurrency 4: CPU ratio pipes/same-job | 0.71 (0.72 with start-up and stop) | ≤ 0.9 | yes |",
		// Plain HTTP: the variants other than the default, and the best.
		"| Same job, concurrency 4, plain HTTP: CPU µs per msg, same-job consumer (GOMAXPROCS=1) | 70.0 (72.0 with start-up and stop; 3000 msgs/s); pipes ÷ it 0.91 (0.92 with start-up and stop) |  |  |",
		"| Same job, concurrency 4, plain HTTP: CPU µs per msg, same-job consumer (idle pool sized to the concurrency) | 85.0 (88.0 with start-up and stop; 2950 msgs/s); pipes ÷ it 0.75 (0.75 with start-up and stop) |  |  |",
		"| Same job, concurrency 4, plain HTTP: CPU ratio pipes ÷ the best same-job consumer (GOMAXPROCS=1) | 0.91 | ≤ 0.8 | **no** |",
		// TLS: pipes, every variant, and the best.
		"| Same job, concurrency 4, TLS: CPU µs per msg, pipes (records as they are) | 72.0 (75.0 with start-up and stop; 3100 msgs/s; 9 TLS handshakes) |",
		"| Same job, concurrency 4, TLS: CPU µs per msg, same-job consumer (as a user writes it) | 100.0 (105.0 with start-up and stop; 2800 msgs/s; 7 TLS handshakes); pipes ÷ it 0.72 (0.71 with start-up and stop) |  |  |",
		"| Same job, concurrency 4, TLS: CPU µs per msg, same-job consumer (GOMAXPROCS=1) | 90.0",
		"| Same job, concurrency 4, TLS: CPU µs per msg, same-job consumer (idle pool sized to the concurrency) | 95.0",
		"| Same job, concurrency 4, TLS: CPU ratio pipes ÷ the best same-job consumer (GOMAXPROCS=1) | 0.80 | ≤ 0.8 | yes |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "plain HTTP: CPU µs per msg, same-job consumer (as a user writes it)") {
		t.Errorf("the default variant over plain HTTP is printed twice:\n%s", out)
	}
}

func TestAnOlderSameJobResultPrintsNoVariantRows(t *testing.T) {
	var b strings.Builder
	if err := writeReport(&b, sampleResults()); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.Contains(out, "the best same-job consumer") || strings.Contains(out, ", TLS:") {
		t.Errorf("a result without variants prints variant rows:\n%s", out)
	}
}

func TestSameJobVariantsAreParsedWithTheDefaultFirst(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
		err      string
	}{
		{name: "the default list", in: "default,gomaxprocs1,pool", want: []string{"samejob", "samejob-gomaxprocs1", "samejob-pool"}},
		{name: "the default is added when not named", in: "pool", want: []string{"samejob", "samejob-pool"}},
		{name: "all four", in: "gomaxprocs1+pool, pool,gomaxprocs1", want: []string{"samejob", "samejob-gomaxprocs1-pool", "samejob-pool", "samejob-gomaxprocs1"}},
		{name: "a repeated name runs once", in: "pool,pool", want: []string{"samejob", "samejob-pool"}},
		{name: "nothing is the default alone", in: "", want: []string{"samejob"}},
		{name: "an unknown name is an error", in: "default,fast", err: `-samejob-variants: unknown variant "fast" (want default,gomaxprocs1,pool,gomaxprocs1+pool)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := parseVariants(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.runner)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("runners %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEachSameJobVariantRunsWithItsEnvironmentAndFlags(t *testing.T) {
	for _, tc := range []struct {
		runner string
		env    []string
		flags  []string
	}{
		{runner: "samejob"},
		{runner: "samejob-gomaxprocs1", env: []string{"GOMAXPROCS=1"}},
		{runner: "samejob-pool", flags: []string{"-pool", "16"}},
		{runner: "samejob-gomaxprocs1-pool", env: []string{"GOMAXPROCS=1"}, flags: []string{"-pool", "16"}},
	} {
		v, ok := sameJobVariantOf(tc.runner)
		if !ok {
			t.Fatalf("no variant runs as %s", tc.runner)
		}
		if got := v.env(); !reflect.DeepEqual(got, tc.env) {
			t.Errorf("%s: environment %v, want %v", tc.runner, got, tc.env)
		}
		if got := v.flags(16); !reflect.DeepEqual(got, tc.flags) {
			t.Errorf("%s: flags %v, want %v", tc.runner, got, tc.flags)
		}
	}
	if _, ok := sameJobVariantOf("pipes-record"); ok {
		t.Error("pipes-record is taken for a variant of the same-job consumer")
	}
}

func TestTheBestVariantIsTheOneWithTheLeastCPUWhileDraining(t *testing.T) {
	runs := []Run{
		{Runner: "pipes-record", DrainCPUPer1000: 0.06, CPUPer1000: 0.07},
		{Runner: "pipes-record", DrainCPUPer1000: 0.08, CPUPer1000: 0.09},
		{Runner: "samejob", DrainCPUPer1000: 0.09, CPUPer1000: 0.1},
		{Runner: "samejob-gomaxprocs1", DrainCPUPer1000: 0.07, CPUPer1000: 0.08},
		{Runner: "samejob-gomaxprocs1", DrainCPUPer1000: 0.075, CPUPer1000: 0.08},
		{Runner: "samejob-pool", DrainCPUPer1000: 0.085, CPUPer1000: 0.09},
	}
	vs, err := parseVariants("default,gomaxprocs1,pool")
	if err != nil {
		t.Fatal(err)
	}
	pipes := summarize(runs, "pipes-record")
	got := versus(runs, pipes, vs)
	if got.Best != "gomaxprocs1" {
		t.Errorf("best %q, want gomaxprocs1", got.Best)
	}
	// pipes' median 0.07 over gomaxprocs1's 0.0725.
	if want := 0.07 / 0.0725; math.Abs(got.BestCPURatio-want) > 1e-9 {
		t.Errorf("pipes ÷ the best %.4f, want %.4f", got.BestCPURatio, want)
	}
	if len(got.Consumers) != 3 || got.Consumers[0].Variant != "default" || math.Abs(got.Consumers[0].CPURatio-0.07/0.09) > 1e-9 {
		t.Errorf("consumers %+v, want default first with pipes ÷ it %.4f", got.Consumers, 0.07/0.09)
	}
}
