package httpcore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// HasPlaceholder reports whether s holds a Pipes template placeholder
// (`<$.path>` or a reserved `<aws.pipes.…>` variable).
//
// A value that is, as a whole, a valid JSON path (`$.body.tenant`) counts
// too: Pipes' dynamic path parameter. One that only starts like a path but
// is not one (`$.5 off`) stays a constant, so that a secret header value is
// never quoted in a path error.
func HasPlaceholder(s string) bool {
	return strings.Contains(s, "<$") || strings.Contains(s, "<aws.") || isDynamicPath(s)
}

// isDynamicPath reports whether s is a valid bare JSON path.
func isDynamicPath(s string) bool {
	if !template.IsDynamicPath(s) {
		return false
	}
	_, err := template.Parse("<" + s + ">")
	return err == nil
}

// DynamicConfig is what a request renders per record: the URL (with path
// parameters), query parameters and headers of an http target or
// enrichment. Values are final: `${ENV}` references were resolved by the
// configuration loader.
type DynamicConfig struct {
	// URL is the configured endpoint; its path and query may hold
	// placeholders (`<$.body.id>`).
	URL string
	// PathParameters fill the URL's `*`, one each, in order, as Pipes
	// fills an API destination's or API Gateway's path wildcards
	// (PathParameterValues). Each is a constant, a bare JSON path
	// (`$.body.id`) or text with placeholders. When any is given, the URL
	// must have exactly as many `*`.
	PathParameters []string
	// Query values and Headers values may be constants, bare JSON paths or
	// text with placeholders.
	Query   map[string]string
	Headers map[string]string
	// Vars are the reserved template variables.
	Vars template.Vars
}

// Static is what NewDynamic leaves to the Client: the fields of Config
// that do not change per record.
type Static struct {
	// URL is Config.URL: the URL with its path parameters in place and
	// the placeholders' angle brackets dropped (for checks and display).
	URL string
	// SecretURL is Config.SecretURL: the URL's literal text.
	SecretURL string
	// Headers are the headers without placeholders (Config.Headers).
	Headers map[string]string
	// Secrets are the constant query values (Config.Secrets): secrets, as
	// header values are.
	Secrets []string
}

// Dynamic renders the parts of a request that come from the record: the
// URL (each placeholder's value path-escaped, so a value cannot add path
// segments or a query), query parameters and header values. It is
// immutable and safe for concurrent use.
type Dynamic struct {
	url    []urlPart // nil when the URL is static
	query  []namedTemplate
	header []namedTemplate
	vars   template.Vars
}

type urlPart struct {
	text string             // literal text, when tmpl is nil
	tmpl *template.Template // a single placeholder
}

type namedTemplate struct {
	name string
	tmpl *template.Template
}

// NewDynamic splits cfg into what is rendered per record and what is not.
// Errors name the part at fault and never hold a header or query value or
// the URL.
func NewDynamic(cfg DynamicConfig) (*Dynamic, Static, error) {
	d := &Dynamic{vars: cfg.Vars}
	raw, err := FillPathParameters(cfg.URL, cfg.PathParameters)
	if err != nil {
		return nil, Static{}, err
	}
	st := Static{URL: raw, SecretURL: raw}
	if HasPlaceholder(raw) {
		parts, err := parseURL(raw)
		if err != nil {
			return nil, Static{}, err
		}
		d.url = parts
		st.URL = strings.NewReplacer("<", "", ">", "").Replace(raw) // for display and checks only
		st.SecretURL = literalText(parts)
	}
	var problems []error
	if d.query, err = parseNamed(cfg.Query, "query parameter"); err != nil {
		problems = append(problems, err)
	}
	for _, v := range cfg.Query {
		if !HasPlaceholder(v) {
			st.Secrets = append(st.Secrets, v)
		}
	}
	st.Headers = make(map[string]string, len(cfg.Headers))
	for name, value := range cfg.Headers {
		if !HasPlaceholder(value) {
			st.Headers[name] = value
			continue
		}
		if !IsToken(name) {
			problems = append(problems, fmt.Errorf("header name %q is not valid", name))
			continue
		}
		tmpl, err := template.ParseParameter(value)
		if err != nil {
			problems = append(problems, fmt.Errorf("header %q: %w", name, err))
			continue
		}
		d.header = append(d.header, namedTemplate{name: name, tmpl: tmpl})
	}
	if len(problems) > 0 {
		return nil, Static{}, errors.Join(problems...)
	}
	return d, st, nil
}

// FillPathParameters puts values in place of the `*` of rawURL, one each,
// in order (Pipes' PathParameterValues); a bare JSON path becomes a
// `<$.path>` placeholder. With no values rawURL is returned as it is. A
// URL whose count of `*` differs from len(values) is an error, which does
// not quote the URL (it may hold credentials).
func FillPathParameters(rawURL string, values []string) (string, error) {
	if len(values) == 0 {
		return rawURL, nil
	}
	if n := strings.Count(rawURL, "*"); n != len(values) {
		return "", fmt.Errorf("url has %d '*' for %d path_parameters: each '*' is filled by one path parameter, in order", n, len(values))
	}
	var b strings.Builder
	rest := rawURL
	for _, v := range values {
		i := strings.IndexByte(rest, '*')
		b.WriteString(rest[:i])
		if isDynamicPath(v) {
			v = "<" + v + ">"
		}
		b.WriteString(v)
		rest = rest[i+1:]
	}
	b.WriteString(rest)
	return b.String(), nil
}

// Empty reports whether nothing is rendered per record.
func (d *Dynamic) Empty() bool {
	return d == nil || (d.url == nil && d.query == nil && d.header == nil)
}

// parseURL splits a URL with placeholders into literal parts and
// placeholders. The literal parts must form an absolute http(s) URL.
func parseURL(raw string) ([]urlPart, error) {
	var parts []urlPart
	var skeleton strings.Builder
	rest := raw
	for {
		i := strings.Index(rest, "<$")
		if j := strings.Index(rest, "<aws."); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			parts = append(parts, urlPart{text: rest})
			skeleton.WriteString(rest)
			break
		}
		end := strings.IndexByte(rest[i:], '>')
		if end < 0 {
			return nil, fmt.Errorf("url: placeholder %q is not closed with >", rest[i:])
		}
		if i > 0 {
			parts = append(parts, urlPart{text: rest[:i]})
			skeleton.WriteString(rest[:i])
		}
		t, err := template.Parse(rest[i : i+end+1])
		if err != nil {
			return nil, fmt.Errorf("url: %w", err)
		}
		parts = append(parts, urlPart{tmpl: t})
		skeleton.WriteString("x")
		rest = rest[i+end+1:]
	}
	u, err := url.Parse(skeleton.String())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url must be an absolute http or https URL")
	}
	if partsInHost(raw) {
		return nil, fmt.Errorf("url: placeholders may stand in the path or query, not in the host")
	}
	return parts, nil
}

// literalText is the URL of parts without its placeholders.
func literalText(parts []urlPart) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.text)
	}
	return b.String()
}

// partsInHost reports whether a placeholder stands before the path.
func partsInHost(raw string) bool {
	i := strings.Index(raw, "://")
	if i < 0 {
		return false
	}
	afterScheme := raw[i+3:]
	slash := strings.IndexByte(afterScheme, '/')
	if slash < 0 {
		slash = len(afterScheme)
	}
	return HasPlaceholder(afterScheme[:slash])
}

func parseNamed(m map[string]string, what string) ([]namedTemplate, error) {
	var out []namedTemplate
	for name, v := range m {
		src := v
		if isDynamicPath(v) { // Pipes' dynamic path parameter: the whole value
			src = "<" + v + ">"
		}
		t, err := template.Parse(src)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", what, name, err)
		}
		out = append(out, namedTemplate{name: name, tmpl: t})
	}
	return out, nil
}

// Render returns the request URL and the rendered headers for an event,
// base being the Client's URL. As Pipes' dynamic parameters, they are read
// from the source record, not from the payload an input template or
// enrichment made. An error is the record's (a header value with control
// characters is pipe.Permanent).
func (d *Dynamic) Render(base string, ev *pipe.Event) (string, [][2]string, error) {
	rec := &pipe.Event{Message: ev.Message}
	rec.RecordJSON, _ = ev.Message.JSON()
	rec.SetBody(ev.Body())
	ev = rec
	target := base
	if d.url != nil {
		var b strings.Builder
		inQuery := false
		for _, p := range d.url {
			if p.tmpl == nil {
				b.WriteString(p.text)
				inQuery = inQuery || strings.Contains(p.text, "?")
				continue
			}
			v, err := p.tmpl.Render(ev, d.vars)
			if err != nil {
				return "", nil, fmt.Errorf("rendering the url: %w", err)
			}
			if inQuery {
				b.WriteString(url.QueryEscape(string(v)))
			} else {
				b.WriteString(url.PathEscape(string(v)))
			}
		}
		target = b.String()
	}
	if len(d.query) > 0 {
		u, err := url.Parse(target)
		if err != nil {
			return "", nil, fmt.Errorf("rendering the url: %w", err)
		}
		q := u.Query()
		for _, p := range d.query {
			v, err := p.tmpl.Render(ev, d.vars)
			if err != nil {
				return "", nil, fmt.Errorf("rendering query parameter %q: %w", p.name, err)
			}
			q.Set(p.name, string(v))
		}
		u.RawQuery = q.Encode()
		target = u.String()
	}
	var headers [][2]string
	for _, h := range d.header {
		v, err := h.tmpl.Render(ev, d.vars)
		if err != nil {
			return "", nil, fmt.Errorf("rendering header %q: %w", h.name, err)
		}
		if !ValidHeaderValue(string(v)) {
			return "", nil, pipe.Permanent(fmt.Errorf("header %q renders to a value with control characters", h.name))
		}
		headers = append(headers, [2]string{h.name, string(v)})
	}
	return target, headers, nil
}
