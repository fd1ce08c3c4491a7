package httptarget

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/pipesproject/pipes/internal/kit/httpcore"
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

// dynamic renders the parts of a request that come from the record: the
// URL (each placeholder's value path-escaped, so a value cannot add path
// segments or a query), query parameters and header values.
type dynamic struct {
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

func (d *dynamic) empty() bool { return d.url == nil && d.query == nil && d.header == nil }

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

// render returns the request URL and the rendered headers for an event.
// As Pipes' dynamic parameters, they are read from the source record, not
// from the payload an input template or enrichment made.
func (d *dynamic) render(base string, ev *pipe.Event) (string, [][2]string, error) {
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
		if !httpcore.ValidHeaderValue(string(v)) {
			return "", nil, pipe.Permanent(fmt.Errorf("header %q renders to a value with control characters", h.name))
		}
		headers = append(headers, [2]string{h.name, string(v)})
	}
	return target, headers, nil
}
