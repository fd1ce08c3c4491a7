package ui

import (
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/scrub"
)

// Masked stands where a secret was in a pipe's configuration.
const Masked = "•••• (hidden)"

// Setting is one configuration value of a pipe as the page shows it.
type Setting struct {
	// Key is the setting's path: the Go field names of config.Pipe in
	// snake case, dotted ("target.headers.Authorization").
	Key string `json:"key"`
	// Value is its value with every secret masked.
	Value string `json:"value"`
}

// Settings lists the pipe's configuration (the values that are set) with
// its secrets masked: every header value (they are where credentials from
// the environment go), every query parameter value, the password and the
// query values of every URL, any field named like a token, secret or
// password, and, wherever it appears, the value of an environment variable
// interpolated into free text (an input template, a filter: see
// freeTextSecrets). Positions in the file are left out.
func Settings(p config.Pipe) []Setting {
	var out []Setting
	walk(&out, "", "", reflect.ValueOf(p))
	if free := scrub.New(freeTextSecrets(p)...); len(free) > 0 {
		for i := range out {
			out[i].Value = free.Replace(out[i].Value, Masked)
		}
	}
	return out
}

// Secrets lists the secret values of the pipe's configuration (those
// Settings masks), in every form (scrub.Forms), for scrubbing texts that
// may quote them (errors): with a header value, the credentials in it
// (scrub.HeaderValue); with a URL's password, its "user:password".
func Secrets(p config.Pipe) scrub.Secrets {
	var vals []string
	collect(&vals, "", reflect.ValueOf(p))
	return scrub.New(append(vals, freeTextSecrets(p)...)...)
}

// minEnvSecret is the shortest interpolated value taken for a secret:
// shorter ones ("1", "us") would blank out ordinary text.
const minEnvSecret = 4

// freeTextSecrets are the values of environment variables interpolated
// into the pipe's free text: input templates, filter patterns, jq and expr
// programs, where a key or token may have been put (`"key": "${API_KEY}"`).
// A variable used only for a queue URL or a region is not one: the page
// keeps showing those.
func freeTextSecrets(p config.Pipe) []string {
	if len(p.EnvValues) == 0 {
		return nil
	}
	var free []string
	eachValue("", reflect.ValueOf(p), func(field string, _ reflect.Kind, _, s string) {
		if freeTextField(field) {
			free = append(free, s)
		}
	})
	var out []string
	for _, v := range p.EnvValues {
		if len(v) < minEnvSecret {
			continue
		}
		for _, f := range free {
			if strings.Contains(f, v) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// freeTextField reports whether a field holds free text.
func freeTextField(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"template", "pattern", "jq", "expr"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func skipField(f reflect.StructField) bool {
	return !f.IsExported() || f.Name == "Dir" || f.Name == "EnvValues" || strings.HasSuffix(f.Name, "Pos")
}

func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "secret", "password", "passwd", "apikey", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// maskAll reports whether every value of a map field is masked.
func maskAll(name string) bool { return name == "Headers" || name == "Query" }

func walk(out *[]Setting, key, name string, v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(out, key, name, v.Elem())
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if skipField(f) {
				continue
			}
			walk(out, join(key, snake(f.Name)), f.Name, v.Field(i))
		}
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		for _, k := range keys {
			val := fmt.Sprint(v.MapIndex(k).Interface())
			if maskAll(name) || secretName(k.String()) {
				val = Masked
			} else {
				val = maskText(val)
			}
			*out = append(*out, Setting{Key: join(key, k.String()), Value: val})
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return
		}
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = maskText(fmt.Sprint(v.Index(i).Interface()))
		}
		*out = append(*out, Setting{Key: key, Value: strings.Join(parts, "; ")})
	default:
		if v.IsZero() {
			return
		}
		val := fmt.Sprint(v.Interface())
		if d, ok := v.Interface().(time.Duration); ok {
			val = d.String()
		}
		if secretName(name) {
			val = Masked
		} else {
			val = maskText(val)
		}
		*out = append(*out, Setting{Key: key, Value: val})
	}
}

// collect gathers the secret values of v.
func collect(vals *[]string, name string, v reflect.Value) {
	eachValue(name, v, func(field string, from reflect.Kind, key, s string) {
		switch {
		case from == reflect.Map && (maskAll(field) || secretName(key)), from == reflect.String && secretName(field):
			*vals = append(*vals, scrub.HeaderValue(s)...)
		default:
			*vals = append(*vals, urlSecrets(s)...)
		}
	})
}

// eachValue calls fn with every string of v, and every map value and
// slice element as text, with the name of the field it stands in, what it
// came from (reflect.String, Map or Slice) and, for a map value, its key.
func eachValue(name string, v reflect.Value, fn func(field string, from reflect.Kind, key, s string)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			eachValue(name, v.Elem(), fn)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); !skipField(f) {
				eachValue(f.Name, v.Field(i), fn)
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			fn(name, reflect.Map, k.String(), fmt.Sprint(v.MapIndex(k).Interface()))
		}
	case reflect.Slice:
		for i := range v.Len() {
			fn(name, reflect.Slice, "", fmt.Sprint(v.Index(i).Interface()))
		}
	case reflect.String:
		fn(name, reflect.String, "", v.String())
	}
}

// maskText masks the password and the query values of a URL; other text
// is kept. A URL the standard parser refuses still has its password
// masked.
func maskText(s string) string {
	if pre, user, pass, rest, ok := userinfo(s); ok && pass != "" {
		s = pre + user + ":xxxxx@" + rest
	}
	u, ok := asURL(s)
	if !ok || u.RawQuery == "" {
		return s
	}
	q := u.Query()
	for k := range q {
		q[k] = []string{"xxxxx"}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// urlSecrets are the password and the query values of a URL.
func urlSecrets(s string) []string {
	var out []string
	if _, user, pass, _, ok := userinfo(s); ok && pass != "" {
		out = append(out, scrub.Userinfo(user, pass)...)
		u, uErr := url.PathUnescape(user)
		p, pErr := url.PathUnescape(pass)
		if uErr == nil && pErr == nil && (u != user || p != pass) {
			out = append(out, scrub.Userinfo(u, p)...)
		}
	}
	if u, ok := asURL(s); ok {
		for _, vs := range u.Query() {
			out = append(out, vs...)
		}
	}
	return out
}

// userinfo splits scheme://user:pass@rest by hand (the password may hold
// characters the URL parser refuses): the userinfo ends at the last "@"
// of the text after "://".
func userinfo(s string) (pre, user, pass, rest string, ok bool) {
	i := strings.Index(s, "://")
	if i < 0 {
		return "", "", "", "", false
	}
	pre, after := s[:i+3], s[i+3:]
	at := strings.LastIndex(after, "@")
	if at < 0 {
		return "", "", "", "", false
	}
	info := after[:at]
	user, pass, _ = strings.Cut(info, ":")
	return pre, user, pass, after[at+1:], true
}

// asURL parses s when it is an absolute URL with a host.
func asURL(s string) (*url.URL, bool) {
	if !strings.Contains(s, "://") {
		return nil, false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, false
	}
	return u, true
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

// snake turns a Go field name into snake case: QueueURL → queue_url.
func snake(s string) string {
	r := []rune(s)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			if i > 0 && (unicode.IsLower(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1])) {
				b.WriteByte('_')
			}
			c = unicode.ToLower(c)
		}
		b.WriteRune(c)
	}
	return b.String()
}
