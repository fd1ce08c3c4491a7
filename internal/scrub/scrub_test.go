package scrub

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

var errMarker = errors.New("marker")

func TestErrorTakesEverySecretOutAndKeepsWhatTheErrorIs(t *testing.T) {
	s := New("p@ss w/rd", "")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"plain", fmt.Errorf("login p@ss w/rd refused: %w", errMarker), "login xxxxx refused: marker"},
		{"query escaped", fmt.Errorf("dial amqp://u:p%%40ss+w%%2Frd@h: %w", errMarker), "dial amqp://u:xxxxx@h: marker"},
		{"path escaped", fmt.Errorf("GET /p@ss%%20w%%2Frd: %w", errMarker), "GET /xxxxx: marker"},
		{"base64", fmt.Errorf("got cEBzcyB3L3Jk: %w", errMarker), "got xxxxx: marker"},
		{"none", fmt.Errorf("nothing here: %w", errMarker), "nothing here: marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := s.Error(tt.err)
			if got.Error() != tt.want {
				t.Fatalf("%q, want %q", got.Error(), tt.want)
			}
			if !errors.Is(got, errMarker) {
				t.Fatal("the scrubbed error no longer is what it wrapped")
			}
		})
	}
	if s.Error(nil) != nil {
		t.Fatal("nil is not nil")
	}
}

// echoes are the ways a server may quote secret: one per encoding.
func echoes(secret string) []struct{ name, text string } {
	quoted, _ := json.Marshal(secret)
	b := []byte(secret)
	return []struct{ name, text string }{
		{"raw", secret},
		{"query-escaped", url.QueryEscape(secret)},
		{"path-escaped", url.PathEscape(secret)},
		{"JSON-escaped", string(quoted[1 : len(quoted)-1])},
		{"base64 standard, padded", base64.StdEncoding.EncodeToString(b)},
		{"base64 standard, raw", base64.RawStdEncoding.EncodeToString(b)},
		{"base64 URL-safe, padded", base64.URLEncoding.EncodeToString(b)},
		{"base64 URL-safe, raw", base64.RawURLEncoding.EncodeToString(b)},
		{"base64 standard, query-escaped", url.QueryEscape(base64.StdEncoding.EncodeToString(b))},
	}
}

func TestTextTakesOutEveryEncodingOfASecret(t *testing.T) {
	const secret = "tok/en+with<html>&chars?"
	s := New(secret)
	for _, e := range echoes(secret) {
		t.Run(e.name, func(t *testing.T) {
			text := "denied: " + e.text + " (retry)"
			if got := s.Text(text); got != "denied: xxxxx (retry)" {
				t.Fatalf("Text(%q) = %q", text, got)
			}
		})
	}
}

// TestTextTakesOutASecretBase64EncodedInsideALongerText: at each of the
// three offsets a secret can start at in a base64 group, the encoded
// secret is taken out of the encoded text but for at most 3 characters at
// each edge, which do not say enough of it to matter (at most 2 bytes).
func TestTextTakesOutASecretBase64EncodedInsideALongerText(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	s := New(secret)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		for _, prefix := range []string{`{"token":"`, `{"token": "`, `{"token":  "`} {
			text := enc.EncodeToString([]byte(prefix + secret + `","user":"svc"}`))
			got := s.Text(text)
			if !strings.Contains(got, Placeholder) {
				t.Errorf("offset %d: %q is kept whole", len(prefix)%3, got)
			}
			clean := strings.Replace(got, Placeholder, "", 1)
			if len(text)-len(clean) < enc.EncodedLen(len(secret))-8 {
				t.Errorf("offset %d: only %d of %q's characters were taken out", len(prefix)%3, len(text)-len(clean), text)
			}
		}
	}
}

func TestNewKeepsEachFormOnceLongestFirst(t *testing.T) {
	s := New("p4ss-word", "other-key", "p4ss-word", "")
	for i := 1; i < len(s); i++ {
		if len(s[i]) > len(s[i-1]) || slices.Contains(s[:i], s[i]) {
			t.Fatalf("%q: not longest first, or a form twice", s)
		}
	}
	if !slices.Contains(s, "cDRzcy13b3Jk") || !slices.Contains(s, "other-key") {
		t.Fatalf("%q lacks a form", s)
	}
}

func TestShortValuesKeepOrdinaryText(t *testing.T) {
	tests := []struct {
		name, secret, in, want string
	}{
		{"a 3-byte value has no base64 form", "foo", "Zm9v is kept", "Zm9v is kept"},
		{"a 4-byte value's base64 is a secret", "true", "dHJ1ZQ== and dHJ1ZQ", "xxxxx and xxxxx"},
		{"a 5-byte value has no aligned middles (4 characters)", "abcde", "YWJj and YmNk are kept", "YWJj and YmNk are kept"},
		{"a 7-byte value has aligned middles of 6 bytes", "abcdefg", "YWJjZGVm and YmNkZWZn", "xxxxx and xxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.secret).Text(tt.in); got != tt.want {
				t.Fatalf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestReplaceMergesOverlappingSecretsAndLeavesThePlaceholdersOwnText(t *testing.T) {
	s := New("admin:hunter22", "hunter22", "aaaa")
	tests := []struct{ name, in, placeholder, want string }{
		{"overlapping values are one stretch", "for admin:hunter22@h", "[redacted]", "for [redacted]@h"},
		{"overlapping matches of one value", "x aaaaaaa y", "#", "x # y"},
		{"adjacent values are one stretch", "hunter22hunter22!", "#", "#!"},
		{"a placeholder already in the text is kept", "xxxxx hunter22", "•", "xxxxx •"},
		{"no secret, same text", "nothing", "#", "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := s.Replace(tt.in, tt.placeholder); got != tt.want {
				t.Fatalf("Replace(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHeaderValueAndUserinfoNameTheCredentials(t *testing.T) {
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("svc-user:pa55word"))
	tests := []struct {
		name string
		got  []string
		want []string
	}{
		{"a bearer token", HeaderValue("Bearer t0ken-abc"), []string{"Bearer t0ken-abc", "t0ken-abc"}},
		{"basic credentials and their parts", HeaderValue(basic), []string{basic, basic[6:], "svc-user:pa55word", "svc-user", "pa55word"}},
		{"a short basic user is left out", HeaderValue("Basic " + base64.StdEncoding.EncodeToString([]byte("ops:pa55word"))), []string{"Basic b3BzOnBhNTV3b3Jk", "b3BzOnBhNTV3b3Jk", "ops:pa55word", "pa55word"}},
		{"a plain value", HeaderValue("k3y-value"), []string{"k3y-value"}},
		{"userinfo", Userinfo("svc", "pw"), []string{"pw", "svc:pw"}},
		{"userinfo without a password", Userinfo("svc", ""), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !slices.Equal(tt.got, tt.want) {
				t.Fatalf("%q, want %q", tt.got, tt.want)
			}
		})
	}
	// Userinfo's user:password covers what an HTTP client sends for it.
	if got := New(Userinfo("svc-user", "pa55word")...).Text(basic); got != "Basic xxxxx" {
		t.Fatalf("the Basic form of a URL's userinfo: %q", got)
	}
}

// FuzzText: for any secret of at least MinEncoded bytes and any text, the
// scrubbed text holds none of the secret's encodings (echoes), nor any
// other of its forms. The placeholder is a byte no form of such a secret
// holds, so that a form cannot run into it.
func FuzzText(f *testing.F) {
	f.Add("secret", "the secret is secret")
	f.Add("sk-live-0123", "token b64 c2stbGl2ZS0wMTIz and c2stbGl2ZS0wMTIz")
	f.Add("a/b+c<d>", `{"key":"a/b+c\u003cd\u003e"} a%2Fb%2Bc%3Cd%3E`)
	f.Add("aaaa", "YWFhYQ==aaaaYWFhYQ")
	f.Fuzz(func(t *testing.T, secret, text string) {
		if len(secret) < MinEncoded || strings.ContainsRune(secret, 0) {
			return
		}
		s := New(secret)
		// The text with the secret's encodings in it, too.
		for _, e := range echoes(secret) {
			text += " " + e.text
		}
		got := s.Replace(text, "\x00")
		for _, e := range echoes(secret) {
			if strings.Contains(got, e.text) {
				t.Fatalf("%q still holds the %s form %q", got, e.name, e.text)
			}
		}
		if s.Contains(got) {
			t.Fatalf("%q still holds a form of %q", got, secret)
		}
	})
}
