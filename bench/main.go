// Command bench is pipes' benchmark harness (issue 5). One command,
//
//	go run ./bench
//
// starts a local SQS-compatible server (-server: local-aws-sqs from .ci/sqs,
// the default, or fauxqs from .ci/fauxqs), builds pipes and the
// minimal consumer (bench/minimal), and measures throughput and CPU per
// message against the minimal consumer, API calls per message, the idle
// cost, scale-up and memory. Results go to bench/results/ (results.json,
// CSV files and scaleup.png);
//
//	go run ./bench -report
//
// prints the Markdown table the README includes. -quick is a smoke run of
// about two minutes whose results go to bench/results/quick/ so
// that they never replace the full run's. The harness never runs under
// `go test`.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// options are the harness's flags.
type options struct {
	server      string // -server: a key of servers
	scenarios   map[string]bool
	n, size     int
	concurrency int
	reps        int
	wait        time.Duration
	quick       bool

	idleWait    time.Duration
	idleSeconds time.Duration

	scaleMax     int
	scaleBacklog int
	scaleDelay   time.Duration
	scaleFast    int

	sameConc     []int
	sameRounds   int
	sameVariants []sameJobVariant // -samejob-variants; the default variant first
	sameTLS      bool             // -samejob-tls: the same-job rounds also run through a TLS proxy
	benthos      string           // -benthos: a Benthos v4 binary, measured beside pipes when set

	heapProfiles string // -heap-profiles: a folder for the heap scenario's profiles
	heapSizes    []int  // -heap-sizes: the body sizes the heap scenario measures
	cpuProfiles  string // -cpu-profiles: a folder for CPU profiles of a same-job drain
	pipesEnv     string // -pipes-env: K=V,… added to the pipes runner's environment

	memConc    int
	memSize    int
	memBudget  int64
	memDelay   time.Duration
	memSeconds time.Duration

	crash  crashOptions
	rabbit rabbitOptions // the rabbitjob scenario's
}

// defaultScenarios run unless -scenarios says otherwise; allScenarios adds
// the optional ones.
var (
	defaultScenarios = []string{"throughput", "samejob", "calls", "ratelimit", "idle", "scaleup", "memory", "heap", "rabbitjob"}
	allScenarios     = append(defaultScenarios[:len(defaultScenarios):len(defaultScenarios)], "trickle", "crash")
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run() error {
	var o options
	flag.StringVar(&o.server, "server", "local-aws-sqs", "the SQS-compatible server to run against: local-aws-sqs or fauxqs (results of fauxqs go to a fauxqs folder under the results folder)")
	scen := flag.String("scenarios", strings.Join(defaultScenarios, ","), "scenarios to run: "+strings.Join(allScenarios, ",")+" (trickle and crash are optional)")
	report := flag.Bool("report", false, "print the Markdown table of the results folder and exit")
	out := flag.String("out", "", "results folder (default bench/results, or bench/results/quick with -quick)")
	flag.IntVar(&o.n, "n", 20000, "messages per throughput run")
	flag.IntVar(&o.size, "size", 200, "message body size in bytes (throughput, calls)")
	flag.IntVar(&o.concurrency, "concurrency", 16, "concurrent batches in the throughput runs (both runners)")
	flag.IntVar(&o.reps, "reps", 5, "throughput runs per runner (alternating; medians are reported)")
	flag.DurationVar(&o.wait, "wait", 2*time.Second, "long-poll wait time in the throughput runs")
	flag.BoolVar(&o.quick, "quick", false, "small sizes for a smoke run of about two minutes")
	flag.DurationVar(&o.idleWait, "idle-wait", 20*time.Second, "wait_time of the idle run")
	flag.DurationVar(&o.idleSeconds, "idle-seconds", time.Minute, "how long the idle cost is measured")
	flag.IntVar(&o.scaleMax, "scaleup-max", 1000, "max_concurrency of the scale-up runs (from initial 5)")
	flag.IntVar(&o.scaleBacklog, "scaleup-backlog", 10000, "backlog kept on the queue during scale-up")
	flag.DurationVar(&o.scaleDelay, "scaleup-delay", 5*time.Second, "target answer delay during scale-up")
	flag.IntVar(&o.scaleFast, "scaleup-fast", 6000, "scale_up_per_minute of the second scale-up run (0: none)")
	sameConc := flag.String("samejob-concurrency", "4,16", "concurrencies of the same-job comparison (comma-separated)")
	flag.IntVar(&o.sameRounds, "samejob-rounds", 3, "rounds of the same-job comparison at each concurrency (the runners' order rotates; medians are reported)")
	variants := flag.String("samejob-variants", "default,gomaxprocs1,pool", "variants of the same-job consumer in the same-job comparison: default (as a user writes it), gomaxprocs1 (GOMAXPROCS=1), pool (its SDK client's idle pool sized to the concurrency), gomaxprocs1+pool; default always runs")
	flag.BoolVar(&o.sameTLS, "samejob-tls", false, "the same-job comparison also runs, in the same rounds, with every runner reaching the server through a TLS proxy (AWS_CA_BUNDLE); doubles its time")
	flag.StringVar(&o.benthos, "benthos", "", "a Benthos v4 binary to measure in the same-job comparison (built outside the repository)")
	flag.StringVar(&o.pipesEnv, "pipes-env", "", "K=V pairs, comma-separated, added to the environment of the pipes runner (GOMAXPROCS=2: without the scheduler sizing; PIPES_HTTP_TRANSPORT=net/http: without internal/h1)")
	flag.StringVar(&o.cpuProfiles, "cpu-profiles", "", "a folder where the samejob scenario saves CPU profiles of one more drain by pipes' runtime (bench/heapprobe) and by the same-job consumer at each concurrency")
	flag.StringVar(&o.heapProfiles, "heap-profiles", "", "a folder where the heap scenario saves a heap profile of each level (go tool pprof)")
	heapSizes := flag.String("heap-sizes", "200,4096,102400", "body sizes the heap scenario measures (comma-separated, of 200,4096,102400); a run of some keeps the others' figures")
	flag.IntVar(&o.memConc, "memory-concurrency", 1000, "concurrent batches of the memory runs")
	flag.IntVar(&o.memSize, "memory-size", 4096, "message size of the memory runs")
	flag.Int64Var(&o.memBudget, "memory-budget", 8<<20, "--max-inflight-bytes of the bounded memory run")
	flag.DurationVar(&o.memDelay, "memory-delay", 10*time.Second, "target answer delay of the memory runs")
	flag.DurationVar(&o.memSeconds, "memory-seconds", 30*time.Second, "how long each memory run lasts")
	o.crash.register(flag.CommandLine)
	o.rabbit.register(flag.CommandLine)
	flag.Parse()

	root, err := repoRoot()
	if err != nil {
		return err
	}
	if o.sameConc, err = parseConcurrencies(*sameConc); err != nil {
		return err
	}
	if o.heapSizes, err = parseHeapSizes(*heapSizes); err != nil {
		return err
	}
	if o.sameVariants, err = parseVariants(*variants); err != nil {
		return err
	}
	if _, ok := servers[o.server]; !ok {
		return fmt.Errorf("-server: unknown server %q (want local-aws-sqs or fauxqs)", o.server)
	}
	dir := *out
	switch {
	case dir != "":
	case o.quick:
		dir = filepath.Join(root, "bench", "results", "quick")
	default:
		dir = filepath.Join(root, "bench", "results")
	}
	if *out == "" && o.server != "local-aws-sqs" {
		// Never replace the figures of the default server.
		dir = filepath.Join(dir, o.server)
	}
	if *report {
		r, err := loadResults(dir)
		if err != nil {
			return err
		}
		if err := writeReport(os.Stdout, r); err != nil {
			return err
		}
		return writeMicro(os.Stdout, dir)
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(*scen, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !contains(allScenarios, s) {
			return fmt.Errorf("-scenarios: unknown scenario %q (want %s)", s, strings.Join(allScenarios, ","))
		}
		o.scenarios[s] = true
	}
	if o.quick {
		o.applyQuick()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runHarness(ctx, root, dir, o)
}

// applyQuick shrinks every size for a smoke run, keeping flags the user set.
func (o *options) applyQuick() {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	quick := map[string]func(){
		"n":                  func() { o.n = 3000 },
		"reps":               func() { o.reps = 1 },
		"samejob-rounds":     func() { o.sameRounds = 1 },
		"idle-wait":          func() { o.idleWait = 5 * time.Second },
		"idle-seconds":       func() { o.idleSeconds = 15 * time.Second },
		"scaleup-max":        func() { o.scaleMax = 30 },
		"scaleup-backlog":    func() { o.scaleBacklog = 2000 },
		"scaleup-delay":      func() { o.scaleDelay = time.Second },
		"memory-concurrency": func() { o.memConc = 100 },
		"memory-delay":       func() { o.memDelay = 3 * time.Second },
		"memory-seconds":     func() { o.memSeconds = 8 * time.Second },
		"memory-budget":      func() { o.memBudget = 1 << 20 },
		"rabbitjob-n":        func() { o.rabbit.n = 3000 },
		"rabbitjob-rounds":   func() { o.rabbit.rounds = 1 },
	}
	for name, apply := range quick {
		if !set[name] {
			apply()
		}
	}
}

// harness is one run's shared state: the server, the target, the built
// binaries and the children.
type harness struct {
	o            options
	root, tmp    string
	resultsDir   string
	pipesBin     string
	minimalBin   string
	samejobBin   string
	heapprobeBin string
	// benthosBin and benthosVersion are set when -benthos names a binary.
	benthosBin     string
	benthosVersion string
	srv            *sqsServer
	tgt            *target
	kids           *children
	// quietAt is when the abandoned long polls of the last stopped runner
	// have ended: the next drain starts no earlier.
	quietAt time.Time
}

// waitQuiet sleeps until quietAt (or ctx ends).
func (h *harness) waitQuiet(ctx context.Context) error {
	return sleep(ctx, time.Until(h.quietAt))
}

func runHarness(ctx context.Context, root, dir string, o options) error {
	tmp, err := os.MkdirTemp("", "pipes-bench-")
	if err != nil {
		return fmt.Errorf("creating a temporary folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	h := &harness{o: o, root: root, tmp: tmp, resultsDir: dir, kids: &children{pipesEnv: splitEnv(o.pipesEnv)}}
	defer h.kids.killAll()
	progress("building pipes, the minimal consumer and the same-job consumer")
	h.pipesBin = filepath.Join(tmp, "pipes")
	h.minimalBin = filepath.Join(tmp, "minimal")
	h.samejobBin = filepath.Join(tmp, "samejob")
	h.heapprobeBin = filepath.Join(tmp, "heapprobe")
	for bin, pkg := range map[string]string{h.pipesBin: "./cmd/pipes", h.minimalBin: "./bench/minimal", h.samejobBin: "./bench/samejob", h.heapprobeBin: "./bench/heapprobe"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w: %s", pkg, err, out)
		}
	}
	if o.benthos != "" {
		out, err := exec.CommandContext(ctx, o.benthos, "--version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("-benthos %s: %w: %s", o.benthos, err, out)
		}
		h.benthosBin = o.benthos
		h.benthosVersion = benthosVersion(string(out))
	}
	progress("starting the SQS server (" + o.server + ")")
	h.srv, err = startServer(ctx, root, o.server)
	if err != nil {
		return err
	}
	defer h.srv.stop()
	h.tgt, err = startTarget()
	if err != nil {
		return err
	}
	defer h.tgt.close()

	res, err := loadResults(dir)
	if err != nil {
		return err
	}
	command := strings.TrimSpace("go run ./bench " + strings.Join(os.Args[1:], " "))
	date := time.Now().UTC().Format("2006-01-02 15:04 UTC")
	full := true
	for _, s := range defaultScenarios {
		full = full && o.scenarios[s]
	}
	if full || res.Command == "" {
		res.Machine, res.Cores = machine()
		res.Date, res.Command, res.Go, res.Also = date, command, runtime.Version(), nil
		res.Commit = gitHead(ctx, root)
		// An optional scenario's figures from an earlier run would read as
		// this run's: they go unless it runs them too.
		if !o.scenarios["trickle"] {
			res.Trickle = nil
		}
		if !o.scenarios["crash"] {
			res.Crash = nil
		}
	} else {
		also := res.Also[:0]
		for _, a := range res.Also {
			if !strings.HasSuffix(a, ": "+command) {
				also = append(also, a)
			}
		}
		res.Also = append(also, date+": "+command)
	}
	steps := []struct {
		name string
		run  func(context.Context, *Results) error
	}{
		{"throughput", h.throughput},
		{"samejob", h.sameJob},
		{"calls", h.calls},
		{"idle", h.idle},
		{"scaleup", h.scaleUp},
		{"memory", h.memory},
		{"heap", h.heap},
		{"ratelimit", h.rateLimited},
		{"rabbitjob", h.rabbitJob},
		{"trickle", h.trickle},
		{"crash", h.crash},
	}
	var errs []error
	for _, s := range steps {
		if !o.scenarios[s.name] || ctx.Err() != nil {
			continue
		}
		progress("scenario " + s.name)
		if err := s.run(ctx, res); err != nil {
			errs = append(errs, fmt.Errorf("scenario %s: %w", s.name, err))
			progress(fmt.Sprintf("scenario %s failed: %v", s.name, err))
		}
		_ = h.waitQuiet(ctx) // a cancelled ctx is reported below
		if err := res.save(dir); err != nil {
			return err
		}
	}
	if err := writeReport(os.Stdout, res); err != nil {
		return err
	}
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	return errors.Join(errs...)
}

// benthosVersion reads "Version: v4.27.0" out of `benthos --version`.
func benthosVersion(out string) string {
	fs := strings.Fields(out)
	for i, f := range fs {
		if f == "Version:" && i+1 < len(fs) {
			return "Benthos " + fs[i+1]
		}
	}
	return strings.Join(fs, " ")
}

// gitHead names the commit the working tree is on ("" when git fails).
func gitHead(ctx context.Context, root string) string {
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// progress prints a timestamped line to stderr.
func progress(msg string) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), msg)
}

// machine reads the CPU model from /proc/cpuinfo and counts the cores.
func machine() (string, int) {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return model, runtime.NumCPU()
}

// repoRoot walks up from the working directory to the folder with go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// splitEnv splits -pipes-env's comma-separated K=V pairs.
func splitEnv(s string) []string {
	var out []string
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			out = append(out, kv)
		}
	}
	return out
}
