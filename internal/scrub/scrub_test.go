package scrub

import (
	"errors"
	"fmt"
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

func FuzzText(f *testing.F) {
	f.Add("secret", "the secret is secret")
	f.Fuzz(func(t *testing.T, secret, text string) {
		if secret == "" || strings.Contains(secret, "x") {
			return // a secret made of the placeholder's letter can reappear next to it
		}
		if got := New(secret).Text(text); strings.Contains(got, secret) {
			t.Fatalf("%q still holds %q", got, secret)
		}
	})
}
