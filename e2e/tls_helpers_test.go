package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testTLSName is the DNS name the test certificates are issued to (beside
// localhost and 127.0.0.1): a client that dials an address it cannot know
// in advance (a container's) checks this name.
const testTLSName = "infrakit-watch"

// testCA is a self-signed CA and a server certificate it signed, written
// as PEM files.
type testCA struct {
	CAFile, CertFile, KeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate the CA
	// signed, for a server that requires one (-tls-client-ca).
	ClientCertFile, ClientKeyFile string
	Pool                          *x509.CertPool
}

// newTestCA makes a CA and a server certificate for localhost, 127.0.0.1
// and testTLSName in dir (files readable by any user: containers run as
// another).
func newTestCA(t *testing.T, dir string) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "infrakit test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: testTLSName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		DNSNames: []string{testTLSName, "localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, keyDER := issue(t, leaf, ca, caKey)
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "infrakit test client"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, clientKeyDER := issue(t, client, ca, caKey)
	out := testCA{CAFile: filepath.Join(dir, "ca.crt"), CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"), ClientKeyFile: filepath.Join(dir, "client.key"),
		Pool: x509.NewCertPool()}
	out.Pool.AddCert(ca)
	for path, block := range map[string]*pem.Block{
		out.CAFile:         {Type: "CERTIFICATE", Bytes: caDER},
		out.CertFile:       {Type: "CERTIFICATE", Bytes: der},
		out.KeyFile:        {Type: "EC PRIVATE KEY", Bytes: keyDER},
		out.ClientCertFile: {Type: "CERTIFICATE", Bytes: clientDER},
		out.ClientKeyFile:  {Type: "EC PRIVATE KEY", Bytes: clientKeyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// issue signs tmpl for a new key with the CA's and returns the
// certificate and the key, DER.
func issue(t *testing.T, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (der, keyDER []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err = x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der, keyDER
}

// clientConfig trusts the CA and checks the certificate for name.
func (c testCA) clientConfig(name string) *tls.Config {
	return &tls.Config{RootCAs: c.Pool, ServerName: name, MinVersion: tls.VersionTLS12}
}
