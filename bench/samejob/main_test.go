package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// writeCA writes a self-signed CA certificate to a PEM file and returns
// the file and a pool holding the certificate.
func writeCA(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return file, pool
}

func TestThePoolFlagSizesTheSDKClientsIdlePoolAndKeepsTheCABundle(t *testing.T) {
	caFile, caPool := writeCA(t)
	for _, tc := range []struct {
		name         string
		bundle       bool
		n            int
		perHost, all int
	}{
		{name: "the default client, 16 workers", n: 16, perHost: 16, all: 100},
		{name: "the default client, 300 workers", n: 300, perHost: 300, all: 300},
		{name: "the AWS_CA_BUNDLE client, 16 workers", bundle: true, n: 16, perHost: 16, all: 100},
		{name: "fewer than the default keeps the default", n: 4, perHost: 10, all: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bundle := ""
			if tc.bundle {
				bundle = caFile
			}
			t.Setenv("AWS_CA_BUNDLE", bundle)
			t.Setenv("AWS_CONFIG_FILE", os.DevNull)
			t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
			cfg, err := awsconfig.LoadDefaultConfig(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			hc, err := sizedPool(cfg.HTTPClient, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			tr := hc.(*awshttp.BuildableClient).GetTransport()
			if tr.MaxIdleConnsPerHost != tc.perHost || tr.MaxIdleConns != tc.all {
				t.Errorf("idle pool %d per host, %d in all; want %d and %d", tr.MaxIdleConnsPerHost, tr.MaxIdleConns, tc.perHost, tc.all)
			}
			roots := tr.TLSClientConfig.RootCAs
			if tc.bundle && (roots == nil || !roots.Equal(caPool)) {
				t.Errorf("the sized client lost AWS_CA_BUNDLE's root CAs")
			}
			if !tc.bundle && roots != nil {
				t.Errorf("the sized client has root CAs without AWS_CA_BUNDLE")
			}
		})
	}
}
