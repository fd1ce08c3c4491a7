package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes/ui"
)

// topFlags are `pipes top`'s flags.
type topFlags struct {
	url      string
	interval time.Duration
}

func newTopCmd(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var f topFlags
	cmd := &cobra.Command{
		Use:   "top [--url http://127.0.0.1:8080] [--interval 1s]",
		Short: "Show the pipes of a `pipes run --ui` in the terminal: one row per pipe with its rates, failures, depths and circuit, refreshed every second",
		Long: `It reads the status page's JSON (/api/pipes) of a running ` + "`pipes run --ui ADDR`" + `
every --interval and shows one row per pipe: its state and circuit, the
messages received, delivered, filtered, failed and dead-lettered per second,
the failures since start, the queue's and the dead-letter queue's depths, the
oldest message's age and the concurrency. A pipe the page calls unhealthy is
marked with the page's word and since when ("! failing since 12:01:25").
The table follows the terminal's size: when it is narrow, the rightmost
columns go first; when the pipes outnumber its rows, the unhealthy are
shown first and a last line counts the rest ("+3 more"). Over SSH, run it
on the host of the page, or point --url at it.

Off loopback the page needs its token: pipes top sends $PIPES_UI_TOKEN as a
Bearer token (it is never printed). q or Ctrl-C quits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTop(cmd.Context(), f, stdin, stdout)
		},
	}
	cmd.Flags().StringVar(&f.url, "url", "http://127.0.0.1:8080", "the status page of pipes run --ui")
	cmd.Flags().DurationVar(&f.interval, "interval", time.Second, "how often to read the page")
	return cmd
}

// topClient reads /api/pipes.
type topClient struct {
	http  *http.Client
	api   string
	shown string // the URL without credentials, for the header and errors
	token string
}

func newTopClient(raw, token string) (*topClient, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url %q: give the status page's address, e.g. http://127.0.0.1:8080", redactURL(raw))
	}
	shown := u.Redacted()
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/pipes"
	return &topClient{http: &http.Client{Timeout: 5 * time.Second}, api: u.String(), shown: shown, token: token}, nil
}

// redactURL hides the password of a URL that may not parse.
func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparsable)"
}

// pipes reads the pipes shown by the page.
func (c *topClient) pipes(ctx context.Context) ([]ui.PipeView, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.api, nil)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", c.shown, err)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its URL may carry credentials
		}
		return nil, fmt.Errorf("reading %s: %w", c.shown, err)
	}
	defer res.Body.Close()
	switch {
	case res.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("reading %s: 401: the page needs its token: set %s", c.shown, envUIToken)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("reading %s: %s", c.shown, res.Status)
	}
	var body struct {
		Pipes []ui.PipeView `json:"pipes"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 8<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("reading %s: decoding /api/pipes: %w", c.shown, err)
	}
	return body.Pipes, nil
}

func runTop(ctx context.Context, f topFlags, stdin io.Reader, stdout io.Writer) error {
	if f.interval < 100*time.Millisecond {
		return usageErr(fmt.Errorf("--interval must be at least 100ms, got %v", f.interval))
	}
	c, err := newTopClient(f.url, os.Getenv(envUIToken))
	if err != nil {
		return usageErr(err)
	}
	m := &topModel{client: c, interval: f.interval, ctx: ctx}
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx), tea.WithInput(stdin), tea.WithOutput(stdout))
	if _, err := p.Run(); err != nil && !errors.Is(err, tea.ErrProgramKilled) {
		return runtimeErr(fmt.Errorf("pipes top: %w", err))
	}
	return nil
}

// topModel is the bubbletea model of `pipes top`.
type topModel struct {
	client   *topClient
	interval time.Duration
	ctx      context.Context // the command's: it bounds each read

	width, height int
	pipes         []ui.PipeView
	err           error
	at            time.Time
	reads         int
}

// topRead is the answer of one read of /api/pipes.
type topRead struct {
	pipes []ui.PipeView
	err   error
	at    time.Time
}

// topTick asks for the next read.
type topTick struct{}

func (m *topModel) read() tea.Msg {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	ps, err := m.client.pipes(ctx)
	return topRead{pipes: ps, err: err, at: time.Now()}
}

// Init implements tea.Model.
func (m *topModel) Init() tea.Cmd { return m.read }

// Update implements tea.Model.
func (m *topModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		}
	case topRead:
		m.err, m.at = msg.err, msg.at
		if msg.err == nil {
			m.pipes = msg.pipes
			m.reads++
		}
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return topTick{} })
	case topTick:
		return m, m.read
	}
	return m, nil
}

// topColumn is one column of the table.
type topColumn struct {
	title string
	width int
	right bool // numbers are right-aligned
	cell  func(p ui.PipeView) string
}

var (
	topHeader = lipgloss.NewStyle().Bold(true).Reverse(true)
	topBad    = lipgloss.NewStyle().Foreground(lipgloss.Color("9")).Bold(true)
	topWarn   = lipgloss.NewStyle().Foreground(lipgloss.Color("11"))
	topDim    = lipgloss.NewStyle().Faint(true)
)

// topColumns are the columns after the pipe's name, the most wanted first:
// a narrow terminal drops them from the right.
func topColumns() []topColumn {
	rate := func(f float64) string {
		if f >= 100 {
			return fmt.Sprintf("%.0f", f)
		}
		return fmt.Sprintf("%.1f", f)
	}
	depth := func(d *ui.Depths, dlq bool) string {
		if d == nil {
			return "–"
		}
		q := d.Queue
		if dlq {
			q = d.DLQ
		}
		if q == nil {
			return "–"
		}
		return fmt.Sprint(q.Visible)
	}
	return []topColumn{
		{"STATE", 13, false, func(p ui.PipeView) string { return p.State }},
		{"IN/s", 7, true, func(p ui.PipeView) string { return rate(p.Rates.Received) }},
		{"OUT/s", 7, true, func(p ui.PipeView) string { return rate(p.Rates.Delivered) }},
		{"FAIL/s", 7, true, func(p ui.PipeView) string { return rate(p.Rates.Failed) }},
		{"QUEUE", 8, true, func(p ui.PipeView) string { return depth(p.Depths, false) }},
		{"DLQ", 7, true, func(p ui.PipeView) string { return depth(p.Depths, true) }},
		{"CIRCUIT", 8, false, func(p ui.PipeView) string { return p.Circuit }},
		{"FAILED", 9, true, func(p ui.PipeView) string { return fmt.Sprintf("%.0f", p.Totals.Failed) }},
		{"DLQ'D/s", 8, true, func(p ui.PipeView) string { return rate(p.Rates.DeadLettered) }},
		{"FILT/s", 7, true, func(p ui.PipeView) string { return rate(p.Rates.Filtered) }},
		{"AGE", 8, true, func(p ui.PipeView) string {
			if p.OldestMessageAgeSeconds == nil {
				return "–"
			}
			return (time.Duration(*p.OldestMessageAgeSeconds) * time.Second).String()
		}},
		{"CONC", 7, true, func(p ui.PipeView) string { return fmt.Sprintf("%d/%d", p.Concurrency.Current, p.Concurrency.Limit) }},
		{"RECEIVED", 10, true, func(p ui.PipeView) string { return fmt.Sprintf("%.0f", p.Totals.Received) }},
	}
}

// fit pads or cuts s to w cells.
func fit(s string, w int, right bool) string {
	r := []rune(s)
	if len(r) > w {
		if w <= 1 {
			return string(r[:w])
		}
		return string(r[:w-1]) + "…"
	}
	pad := strings.Repeat(" ", w-len(r))
	if right {
		return pad + s
	}
	return s + pad
}

// topMark is why a pipe wants a look, as its row's mark says it.
type topMark struct {
	level string // bad or warn ("" when healthy)
	word  string // the page's health word: failing, circuit open, …
	since time.Time
}

// markOf reads the pipe's health as the page computes it (/api/pipes'
// health: its word, level and since). A page without health (an older
// pipes) is judged from the last sample's rates.
func markOf(p ui.PipeView) topMark {
	h := p.Health
	switch {
	case h.Level == "ok":
		return topMark{}
	case h.Level != "":
		m := topMark{level: h.Level, word: h.Word}
		if h.Since != nil {
			m.since = *h.Since
		}
		return m
	}
	switch {
	case p.State == "not ready" || p.State == "circuit open":
		return topMark{level: "bad", word: p.State}
	case p.Rates.Failed > 0:
		return topMark{level: "bad", word: "failing"}
	case p.State == "draining":
		return topMark{level: "warn", word: p.State}
	case p.Rates.DeadLettered > 0:
		return topMark{level: "warn", word: "DLQ growing"}
	}
	return topMark{}
}

// texts are the mark's forms, longest first: with the clock time (UTC)
// the trouble began, with its age at now, the word alone.
func (m topMark) texts(now time.Time) []string {
	short := "! " + m.word
	if m.since.IsZero() {
		return []string{short}
	}
	age := max(now.Sub(m.since), 0).Round(time.Second)
	return []string{
		short + " since " + m.since.UTC().Format("15:04:05"),
		short + " (" + age.String() + ")",
		short,
	}
}

// rank orders the marks: bad first, then warn, then healthy.
func (m topMark) rank() int {
	switch m.level {
	case "bad":
		return 0
	case "warn":
		return 1
	}
	return 2
}

// topCoreColumns is how many of topColumns come before the mark: the
// columns after them give way to the mark's since. The core columns leave
// at most topMarkRoom cells for it.
const (
	topCoreColumns = 6
	topMarkRoom    = 17
)

// View implements tea.Model.
func (m *topModel) View() string {
	width := m.width
	if width <= 0 {
		width = 80
	}
	now := m.at
	if now.IsZero() {
		now = time.Now()
	}
	var b strings.Builder
	title := fmt.Sprintf("pipes top · %s · %d pipe(s)", m.client.shown, len(m.pipes))
	if !m.at.IsZero() {
		title += " · " + m.at.UTC().Format("15:04:05 UTC")
	}
	b.WriteString(fit(title, width, false) + "\n")

	shown, more := m.shown()
	marks := make([]topMark, len(shown))
	shortest, longest := 0, 0 // the widest mark in its shortest and its longest form
	for i, p := range shown {
		marks[i] = markOf(p)
		if marks[i].level == "" {
			continue
		}
		ts := marks[i].texts(now)
		longest = max(longest, 1+len([]rune(ts[0])))
		shortest = max(shortest, 1+len([]rune(ts[len(ts)-1])))
	}
	nameW := 4
	for _, p := range shown {
		nameW = max(nameW, len([]rune(p.Name)))
	}
	nameW = min(nameW, max(8, width/3))
	cols := []topColumn{}
	used := nameW
	for i, c := range topColumns() {
		// The core columns leave room for a short mark (a long one is
		// cut); the others give way to the whole mark.
		room := min(shortest, topMarkRoom)
		if i >= topCoreColumns {
			room = longest
		}
		if used+1+c.width+room > width {
			break
		}
		cols = append(cols, c)
		used += 1 + c.width
	}
	head := fit("PIPE", nameW, false)
	for _, c := range cols {
		head += " " + fit(c.title, c.width, c.right)
	}
	b.WriteString(topHeader.Render(fit(head, width, false)) + "\n")
	for i, p := range shown {
		row := fit(p.Name, nameW, false)
		for _, c := range cols {
			row += " " + fit(c.cell(p), c.width, c.right)
		}
		if mk := marks[i]; mk.level != "" {
			left := width - len([]rune(row)) - 1
			ts := mk.texts(now)
			text := fit(ts[len(ts)-1], max(left, 0), false)
			for _, t := range ts {
				if len([]rune(t)) <= left {
					text = t
					break
				}
			}
			style := topWarn
			if mk.level == "bad" {
				style = topBad
			}
			row = style.Render(row) + " " + style.Render(strings.TrimRight(text, " "))
		}
		b.WriteString(row + "\n")
	}
	if more > 0 {
		b.WriteString(topDim.Render(fit(fmt.Sprintf("+%d more", more), width, false)) + "\n")
	}
	if len(m.pipes) == 0 && m.err == nil {
		b.WriteString(topDim.Render("reading…") + "\n")
	}
	if m.err != nil {
		b.WriteString(topBad.Render(fit(m.err.Error(), width, false)) + "\n")
	}
	b.WriteString(topDim.Render(fit("rates per second over the page's last sample · q quits", width, false)))
	return b.String()
}

// shown are the pipes that fit the terminal's height, and how many do
// not: all of them in the page's order when they fit, else the unhealthy
// first (bad, then warn, each in the page's order), leaving a line for
// "+N more".
func (m *topModel) shown() ([]ui.PipeView, int) {
	if m.height <= 0 {
		return m.pipes, 0
	}
	rows := m.height - 3 // the title, the header, the footer
	if m.err != nil {
		rows--
	}
	if len(m.pipes) <= rows {
		return m.pipes, 0
	}
	rows = max(rows-1, 0) // the "+N more" line
	ps := slices.Clone(m.pipes)
	slices.SortStableFunc(ps, func(a, b ui.PipeView) int { return markOf(a).rank() - markOf(b).rank() })
	return ps[:rows], len(ps) - rows
}
