package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tlsProxy terminates TLS in front of a plain TCP server (the local SQS
// server) so that runners talk to it as to an https endpoint: each
// accepted TLS connection is copied both ways to one new TCP connection to
// the backend, so a client's keep-alive and redials reach the server as
// they are. Its certificate is signed by a CA made at start, written to
// caFile (PEM) for AWS_CA_BUNDLE. It offers HTTP/1.1 only (ALPN), as the
// backend speaks it, and the key exchanges X25519 and P-256. Its CPU is the
// harness's, counted in no runner's figures. Safe for concurrent use;
// close ends the listener and every connection and waits for their
// goroutines.
type tlsProxy struct {
	endpoint string // https://127.0.0.1:PORT
	caFile   string
	caPool   *x509.CertPool

	ln      net.Listener
	backend string

	// handshakes counts the TLS handshakes begun (ClientHellos): a
	// client's new connections.
	handshakes atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	offers map[string]int64 // ALPN protocols offered ("h2,http/1.1") → handshakes
	closed bool
	wg     sync.WaitGroup
}

// startTLSProxy listens on a free loopback port, proxying to backend
// (host:port), with a new CA whose certificate goes to dir/ca.pem.
func startTLSProxy(dir, backend string) (*tlsProxy, error) {
	caCert, caKey, err := newCA()
	if err != nil {
		return nil, err
	}
	leaf, err := newLeaf(caCert, caKey)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o644); err != nil {
		return nil, fmt.Errorf("writing the proxy's CA certificate: %w", err)
	}
	cfg := &tls.Config{
		Certificates:     []tls.Certificate{leaf},
		NextProtos:       []string{"http/1.1"},
		CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256},
		MinVersion:       tls.VersionTLS12,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the TLS proxy: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	p := &tlsProxy{
		endpoint: "https://" + ln.Addr().String(),
		caFile:   caFile,
		caPool:   pool,
		ln:       ln,
		backend:  backend,
		conns:    map[net.Conn]struct{}{},
		offers:   map[string]int64{},
	}
	cfg.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		p.handshakes.Add(1)
		p.mu.Lock()
		p.offers[strings.Join(hello.SupportedProtos, ",")]++
		p.mu.Unlock()
		return nil, nil // cfg as it is
	}
	p.wg.Go(func() { p.serve(tls.NewListener(ln, cfg)) })
	return p, nil
}

// alpnOffers returns how many handshakes offered each ALPN list (""
// for none): a client over net/http offers "h2,http/1.1", one over
// internal/h1 "http/1.1".
func (p *tlsProxy) alpnOffers() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.offers)
}

// newCA makes a self-signed CA certificate valid for a day.
func newCA() (*x509.Certificate, *rsa.PrivateKey, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, nil, fmt.Errorf("making the proxy's CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "pipes bench CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the proxy's CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the proxy's CA certificate: %w", err)
	}
	return cert, key, nil
}

// newLeaf makes the proxy's certificate for 127.0.0.1 and localhost,
// signed by the CA.
func newLeaf(ca *x509.Certificate, caKey *rsa.PrivateKey) (tls.Certificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("making the proxy's key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("making the proxy's certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// serve accepts until the listener closes.
func (p *tlsProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (out of descriptors): wait a little.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.relay(c) })
	}
}

// track adds c to the live connections; false once the proxy is closed.
func (p *tlsProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tlsProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// relay copies c (TLS, handshake on first read) to a new backend
// connection and back until either side ends.
func (p *tlsProxy) relay(c net.Conn) {
	defer p.untrack(c)
	defer c.Close()
	b, err := net.DialTimeout("tcp", p.backend, 10*time.Second)
	if err != nil {
		return
	}
	if !p.track(b) {
		_ = b.Close()
		return
	}
	defer p.untrack(b)
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(c, b)
		// The server closed: so does the client's side.
		_ = c.Close()
	}()
	_, _ = io.Copy(b, c)
	// The client closed (or its TLS failed): end the backend connection,
	// which ends the other copy.
	_ = b.Close()
	<-done
}

// close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *tlsProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
