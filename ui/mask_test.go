package ui

import (
	"strings"
	"testing"

	"github.com/pipesproject/pipes/config"
)

func TestMaskText(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a URL without secrets is kept", "http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"},
		{"an AMQP password is masked", "amqp://guest:guest@127.0.0.1:5672/", "amqp://guest:xxxxx@127.0.0.1:5672/"},
		{"a password the URL parser refuses is masked", "amqp://u:p%zz@h/", "amqp://u:xxxxx@h/"},
		{"a password holding @ and / is masked whole", "amqp://u:a@b/c@h/v", "amqp://u:xxxxx@h/v"},
		{"query values are masked", "https://h/x?key=abc&x=1", "https://h/x?key=xxxxx&x=xxxxx"},
		{"a user without a password is kept", "http://u@h/", "http://u@h/"},
		{"plain text is kept", "orders", "orders"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := maskText(tc.in); got != tc.want {
				t.Fatalf("maskText(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{"QueueURL": "queue_url", "MaxReceiveCount": "max_receive_count", "TopicARN": "topic_arn",
		"InsecureSkipVerify": "insecure_skip_verify", "URL": "url", "Name": "name"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMaskText checks that no password of a URL survives maskText, and
// that Secrets' scrubbing of the same URL finds it.
func FuzzMaskText(f *testing.F) {
	f.Add("guest", "guest", "127.0.0.1:5672/")
	f.Add("u", "p@ss/w:rd", "h/v?x=1")
	f.Add("u", "%zz", "h")
	f.Fuzz(func(t *testing.T, user, pass, host string) {
		if strings.ContainsAny(user, ":@/?#") || strings.Contains(host, "@") || len(pass) < 3 {
			return
		}
		in := "amqp://" + user + ":" + pass + "@" + host
		if strings.Contains("amqp://"+user+":xxxxx@"+host, pass) {
			return // the password is also elsewhere in the text
		}
		out := maskText(in)
		if strings.Contains(out, pass) {
			t.Fatalf("maskText(%q) = %q keeps the password", in, out)
		}
		found := false
		for _, s := range urlSecrets(in) {
			found = found || s == pass
		}
		if !found {
			t.Fatalf("urlSecrets(%q) = %q lacks the password", in, urlSecrets(in))
		}
	})
}

// TestAVariableInFreeTextIsMasked: a key interpolated into an input
// template or a filter is masked wherever the settings show it, and
// scrubbed from texts; a variable used for the queue URL or the region only
// is shown, and so is a short value.
func TestAVariableInFreeTextIsMasked(t *testing.T) {
	env := map[string]string{
		"API_KEY":   "k-3f9a7c2e11",
		"TENANT":    "acme-tenant-42",
		"QUEUE_URL": "http://127.0.0.1:9324/000000000000/orders",
		"REGION":    "eu-west-1",
		"ONE":       "1",
	}
	yaml := `name: orders
source:
  type: sqs
  queue_url: ${QUEUE_URL}
  region: ${REGION}
filter:
  patterns:
    - '{"body": {"tenant": ["${TENANT}"]}}'
target:
  type: http
  url: http://127.0.0.1:9/hook
  input_template: '{"key": "${API_KEY}", "n": ${ONE}, "order": <$.body>}'
`
	specs, err := config.Loader{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}.Parse("pipe.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, s := range Settings(specs[0]) {
		all.WriteString(s.Key + "=" + s.Value + "\n")
	}
	page := all.String()
	for _, secret := range []string{env["API_KEY"], env["TENANT"]} {
		if strings.Contains(page, secret) {
			t.Errorf("the settings show %q:\n%s", secret, page)
		}
	}
	for _, shown := range []string{env["QUEUE_URL"], env["REGION"], `"n": 1`} {
		if !strings.Contains(page, shown) {
			t.Errorf("the settings hide %q, which stands in no free text or is too short to be a secret:\n%s", shown, page)
		}
	}
	if !strings.Contains(page, Masked) {
		t.Errorf("nothing masked:\n%s", page)
	}
	msg := Secrets(specs[0]).Text("rendering {\"key\": \"" + env["API_KEY"] + "\"} failed")
	if strings.Contains(msg, env["API_KEY"]) {
		t.Errorf("Secrets left the key in %q", msg)
	}
}
