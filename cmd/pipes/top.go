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
oldest message's age and the concurrency. The table follows the terminal's
size: when it is narrow, the rightmost columns go first. Over SSH, run it on
the host of the page, or point --url at it.

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

// unhealthy says why a pipe wants a look ("" when it does not).
func unhealthy(p ui.PipeView) string {
	switch {
	case p.State == "not ready" || p.State == "circuit open" || p.State == "draining":
		return p.State
	case p.Rates.Failed > 0:
		return "failing"
	case p.Rates.DeadLettered > 0:
		return "dead-lettering"
	}
	return ""
}

// View implements tea.Model.
func (m *topModel) View() string {
	width := m.width
	if width <= 0 {
		width = 80
	}
	var b strings.Builder
	title := fmt.Sprintf("pipes top · %s · %d pipe(s)", m.client.shown, len(m.pipes))
	if !m.at.IsZero() {
		title += " · " + m.at.UTC().Format("15:04:05 UTC")
	}
	b.WriteString(fit(title, width, false) + "\n")
	nameW := 4
	for _, p := range m.pipes {
		nameW = max(nameW, len([]rune(p.Name)))
	}
	nameW = min(nameW, max(8, width/3))
	cols := []topColumn{}
	used := nameW
	for _, p := range m.pipes {
		if why := unhealthy(p); why != "" {
			used += 3 + len("dead-lettering") // room for the mark after the row
			break
		}
	}
	for _, c := range topColumns() {
		if used+1+c.width > width {
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
	for _, p := range m.pipes {
		row := fit(p.Name, nameW, false)
		for _, c := range cols {
			row += " " + fit(c.cell(p), c.width, c.right)
		}
		switch why := unhealthy(p); {
		case why == "circuit open" || why == "not ready" || why == "failing":
			row = topBad.Render(row) + " " + topBad.Render("! "+why)
		case why != "":
			row = topWarn.Render(row) + " " + topWarn.Render("! "+why)
		}
		b.WriteString(row + "\n")
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
