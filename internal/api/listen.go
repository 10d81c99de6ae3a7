package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// TLSFiles name what HTTPS is served with.
type TLSFiles struct {
	// Cert and Key are PEM files (-tls-cert, -tls-key); ClientCA, when
	// set, a PEM file of the CA every client's certificate must chain to
	// (-tls-client-ca).
	Cert, Key, ClientCA string
}

// Enabled says whether HTTPS is asked for.
func (f TLSFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// Scheme is the URL scheme the API is served with: "https" or "http".
func (f TLSFiles) Scheme() string {
	if f.Enabled() {
		return "https"
	}
	return "http"
}

// Config loads the files into a server configuration (nil when TLS is not
// asked for).
func (f TLSFiles) Config() (*tls.Config, error) {
	if !f.Enabled() {
		if f.ClientCA != "" {
			return nil, errors.New("-tls-client-ca needs -tls-cert and -tls-key: client certificates are asked for over TLS")
		}
		return nil, nil
	}
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("give both -tls-cert and -tls-key")
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", f.ClientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// CheckListen refuses to serve an address that is not loopback without
// TLS: the token, and every answer, would cross the network in clear.
func CheckListen(listen string, withTLS bool) error {
	if withTLS {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: want host:port: %w", listen, err)
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("-listen %s is not a loopback address, and serving the API there without TLS would send its token "+
		"and every answer in clear: give -tls-cert and -tls-key (and -tls-client-ca to require client certificates), "+
		"or listen on 127.0.0.1", listen)
}

// isLoopback: "localhost" or a loopback IP. A name other than localhost is
// not trusted to resolve to loopback only.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
