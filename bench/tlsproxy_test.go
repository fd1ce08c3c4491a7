package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/sqstest"
	sqssource "github.com/pipesproject/pipes/source/sqs"
)

// startTestProxy starts a TLS proxy in front of a plain HTTP server that
// answers "hello <path>", and stops both when the test ends.
func startTestProxy(t *testing.T) *tlsProxy {
	t.Helper()
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	}))
	t.Cleanup(backend.Close)
	p, err := startTLSProxy(t.TempDir(), strings.TrimPrefix(backend.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p
}

// caPoolOf reads a PEM file into a pool, as AWS_CA_BUNDLE is read.
func caPoolOf(t *testing.T, file string) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("%s holds no PEM certificate", file)
	}
	return pool
}

func TestARequestThroughTheTLSProxyReachesTheServerAndItsCAFileVerifies(t *testing.T) {
	p := startTestProxy(t)
	// ForceAttemptHTTP2 offers h2, as the SDK's client does: the proxy
	// picks HTTP/1.1, which its backend speaks.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPoolOf(t, p.caFile)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, path := range []string{"/one", "/two"} {
		resp, err := client.Get(p.endpoint + path)
		if err != nil {
			t.Fatalf("GET %s through the proxy: %v", path, err)
		}
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(body), "hello "+path; got != want {
			t.Errorf("GET %s answered %q, want %q", path, got, want)
		}
		if resp.Proto != "HTTP/1.1" || resp.TLS == nil || len(resp.TLS.VerifiedChains) == 0 {
			t.Errorf("GET %s: proto %s, TLS %v: want HTTP/1.1 over a verified TLS connection", path, resp.Proto, resp.TLS != nil)
		}
	}
	if n := p.handshakes.Load(); n != 1 {
		t.Errorf("two requests on a keep-alive connection made %d handshakes, want 1", n)
	}
	if got := p.alpnOffers(); got["h2,http/1.1"] != 1 {
		t.Errorf("ALPN offers %v, want one of h2,http/1.1", got)
	}
}

func TestTheTLSProxyIsRefusedWithoutItsCA(t *testing.T) {
	p := startTestProxy(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}
	defer tr.CloseIdleConnections()
	_, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.endpoint + "/")
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("GET without the proxy's CA: %v, want a certificate verification error", err)
	}
}

func TestTheTLSProxyClosesItsLiveConnections(t *testing.T) {
	p := startTestProxy(t)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPoolOf(t, p.caFile)}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.endpoint + "/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	// A keep-alive connection is still open: close must end it and wait
	// for its goroutines, not hang.
	done := make(chan struct{})
	go func() { p.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return with a keep-alive connection open")
	}
}

// TestPipesSQSSourceVerifiesTheTLSProxyByAWSCABundle runs pipes' own SQS
// source (its HTTP client as `pipes run` builds it) through the proxy: it
// honours AWS_CA_BUNDLE over internal/h1 (the default) and over net/http,
// and without the bundle the handshake is refused. It needs the local SQS
// server (skipped without it, fails under CI=true).
func TestPipesSQSSourceVerifiesTheTLSProxyByAWSCABundle(t *testing.T) {
	endpoint := sqstest.Endpoint(t)
	plain := sqstest.Client(t)
	for _, tc := range []struct {
		name, transport, offer string
	}{
		{name: "internal/h1", transport: "", offer: "http/1.1"},
		{name: "net/http", transport: "net/http", offer: "h2,http/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range map[string]string{
				"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_REGION": "us-east-1",
				"AWS_EC2_METADATA_DISABLED": "true", "AWS_PROFILE": "", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
				"HTTP_PROXY": "", "HTTPS_PROXY": "", "http_proxy": "", "https_proxy": "", "PIPES_HTTP_TRANSPORT": tc.transport,
			} {
				t.Setenv(k, v)
			}
			p, err := startTLSProxy(t.TempDir(), strings.TrimPrefix(endpoint, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			url, _ := sqstest.CreateQueue(t, plain, sqstest.QueueOptions{VisibilityTimeout: 30 * time.Second})
			sqstest.SendBodies(t, plain, url, "a", "b", "c")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			t.Setenv("AWS_CA_BUNDLE", p.caFile)
			src, err := sqssource.New(ctx, sqssource.Config{QueueURL: url, Endpoint: p.endpoint, Region: "us-east-1"})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close(ctx)
			if _, err := src.Open(ctx); err != nil {
				t.Fatalf("opening the queue through the proxy with AWS_CA_BUNDLE: %v", err)
			}
			var got int
			for deadline := time.Now().Add(10 * time.Second); got < 3 && time.Now().Before(deadline); {
				msgs, err := src.Receive(ctx, 10)
				if err != nil {
					t.Fatalf("receiving through the proxy: %v", err)
				}
				if err := src.Ack(ctx, msgs); err != nil {
					t.Fatalf("deleting through the proxy: %v", err)
				}
				got += len(msgs)
			}
			if got != 3 {
				t.Errorf("received %d of 3 messages through the proxy", got)
			}
			offers := p.alpnOffers()
			t.Logf("ALPN offers through the proxy: %v", offers)
			if offers[tc.offer] == 0 {
				t.Errorf("no handshake offered %q (offers %v): the source did not use the %s transport", tc.offer, offers, tc.name)
			}

			t.Setenv("AWS_CA_BUNDLE", "")
			src2, err := sqssource.New(ctx, sqssource.Config{QueueURL: url, Endpoint: p.endpoint, Region: "us-east-1"})
			if err != nil {
				t.Fatal(err)
			}
			defer src2.Close(ctx)
			_, err = src2.Open(ctx)
			var verr *tls.CertificateVerificationError
			if !errors.As(err, &verr) {
				t.Errorf("opening the queue through the proxy without AWS_CA_BUNDLE: %v, want a certificate verification error", err)
			}
		})
	}
}
