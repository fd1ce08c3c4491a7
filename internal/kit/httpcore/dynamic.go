package httpcore

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// HasPlaceholder reports whether s holds a Pipes template placeholder
// (`<$.path>` or a reserved `<aws.pipes.…>` variable), or is, as a whole,
// a JSON path (`$.body.tenant`): Pipes' dynamic path parameter.
//
// A value that starts like a path (`$.`, `$[`) is one, as in every other
// templated key: when it does not parse (`$.body.`), NewDynamic fails
// rather than send it as text. A value with a `$` elsewhere
// (`Bearer $x`) is a constant.
func HasPlaceholder(s string) bool {
	return strings.Contains(s, "<$") || strings.Contains(s, "<aws.") || template.IsDynamicPath(s)
}

// pathError is the error of a header or query value that starts like a
// JSON path and is not one. The value is not quoted: were it meant as a
// constant, it may be a secret.
func pathError(what, name string, err error) error {
	where := "the value is not shown"
	if se, ok := errors.AsType[*template.SyntaxError](err); ok && se.Line == 1 {
		// template.ParseParameter locates it in the value as written.
		where = fmt.Sprintf("column %d of the value, which is not shown", se.Column)
	}
	return fmt.Errorf("%s %q: the value starts with $. or $[, so it is a JSON path, and it does not parse (%s)", what, name, where)
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
// It reports every problem at once, joined, each marked with the key it
// is about (keyerr: "url", "path_parameters[0]", "query.id",
// "headers.X-Id"). Errors never hold a header or query value or the URL.
func NewDynamic(cfg DynamicConfig) (*Dynamic, Static, error) {
	d := &Dynamic{vars: cfg.Vars}
	var problems []error
	raw, err := FillPathParameters(cfg.URL, cfg.PathParameters)
	if err != nil {
		problems = append(problems, err)
	}
	st := Static{URL: raw, SecretURL: raw}
	if err == nil && HasPlaceholder(raw) {
		parts, err := parseURL(raw)
		if err != nil {
			problems = append(problems, keyerr.New("url", err))
		}
		d.url = parts
		st.URL = strings.NewReplacer("<", "", ">", "").Replace(raw) // for display and checks only
		st.SecretURL = literalText(parts)
	}
	query, errs := parseNamed(cfg.Query, "query", "query parameter")
	d.query = query
	problems = append(problems, errs...)
	for _, v := range cfg.Query {
		if !HasPlaceholder(v) {
			st.Secrets = append(st.Secrets, v)
		}
	}
	st.Headers = make(map[string]string, len(cfg.Headers))
	for _, name := range slices.Sorted(maps.Keys(cfg.Headers)) {
		value := cfg.Headers[name]
		if !HasPlaceholder(value) {
			st.Headers[name] = value
			continue
		}
		key := "headers." + name
		if !IsToken(name) {
			problems = append(problems, keyerr.New(key, fmt.Errorf("header name %q is not valid", name)))
			continue
		}
		tmpl, err := template.ParseParameter(value)
		switch {
		case err != nil && template.IsDynamicPath(value):
			problems = append(problems, keyerr.New(key, pathError("header", name, err)))
			continue
		case err != nil:
			problems = append(problems, keyerr.New(key, fmt.Errorf("header %q: %w", name, err)))
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
// URL whose count of `*` differs from len(values) is an error about the
// url, which does not quote it (it may hold credentials); a value that is
// not a valid path or template, one about that value
// ("path_parameters[i]", keyerr).
func FillPathParameters(rawURL string, values []string) (string, error) {
	if len(values) == 0 {
		return rawURL, nil
	}
	var problems []error
	if n := strings.Count(rawURL, "*"); n != len(values) {
		problems = append(problems, keyerr.New("url", fmt.Errorf("url has %d '*' for %d path_parameters: each '*' is filled by one path parameter, in order", n, len(values))))
	}
	for i, v := range values {
		if _, err := template.ParseParameter(v); err != nil {
			problems = append(problems, keyerr.New(fmt.Sprintf("path_parameters[%d]", i), fmt.Errorf("path parameter %d %q: %w", i+1, v, err)))
		}
	}
	if len(problems) > 0 {
		return "", errors.Join(problems...)
	}
	var b strings.Builder
	rest := rawURL
	for _, v := range values {
		i := strings.IndexByte(rest, '*')
		b.WriteString(rest[:i])
		if template.IsDynamicPath(v) {
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

// parseNamed compiles the values of m (the query parameters: key is their
// key, what names one in errors), in name order; a bare JSON path is
// Pipes' dynamic path parameter, the whole value. Every problem is
// returned, marked with "key.name".
func parseNamed(m map[string]string, key, what string) ([]namedTemplate, []error) {
	var out []namedTemplate
	var problems []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		v := m[name]
		var t *template.Template
		var err error
		if template.IsDynamicPath(v) {
			t, err = template.ParseParameter(v) // read as <v>, errors located in v
		} else {
			t, err = template.Parse(v)
		}
		switch {
		case err != nil && template.IsDynamicPath(v):
			problems = append(problems, keyerr.New(key+"."+name, pathError(what, name, err)))
		case err != nil:
			problems = append(problems, keyerr.New(key+"."+name, fmt.Errorf("%s %q: %w", what, name, err)))
		default:
			out = append(out, namedTemplate{name: name, tmpl: t})
		}
	}
	return out, problems
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
