package status

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHostCheck(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	tests := []struct {
		listen string
		addr   net.Addr
		host   string
		ok     bool
	}{
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "127.0.0.1:24864", true},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "localhost:24864", true},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "LOCALHOST.:24864", true},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "[::1]:24864", true},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "evil.example:24864", false},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "10.0.0.5:24864", false},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "localhost:8080", false},
		{"127.0.0.1:24864", tcp("127.0.0.1", 24864), "localhost", false},
		{"127.0.0.1:80", tcp("127.0.0.1", 80), "localhost", true},
		{"[::1]:24864", tcp("::1", 24864), "[::1]:24864", true},
		{"watch.internal:24864", tcp("10.0.0.5", 24864), "watch.internal:24864", true},
		{"watch.internal:24864", tcp("10.0.0.5", 24864), "10.0.0.5:24864", true},
		{"watch.internal:24864", tcp("10.0.0.5", 24864), "localhost:24864", false},
		{"watch.internal:24864", tcp("10.0.0.5", 24864), "evil.example:24864", false},
		{"10.0.0.5:24864", tcp("10.0.0.5", 24864), "10.0.0.6:24864", false},
		{"0.0.0.0:24864", tcp("0.0.0.0", 24864), "192.168.1.9:24864", true},
		{"0.0.0.0:24864", tcp("0.0.0.0", 24864), "localhost:24864", true},
		{"0.0.0.0:24864", tcp("0.0.0.0", 24864), "evil.example:24864", false},
		{":24864", tcp("::", 24864), "[fe80::1]:24864", true},
		{":24864", tcp("::", 24864), "evil.example:24864", false},
	}
	for _, tt := range tests {
		why := newHostCheck(tt.listen, tt.addr).refuse(tt.host)
		if (why == "") != tt.ok {
			t.Errorf("listening on %s (%s), Host %q: refused %q, want allowed %v", tt.listen, tt.addr, tt.host, why, tt.ok)
		}
	}
}

// A request whose Host names another site (DNS rebinding) is refused
// with 421 and a JSON error; one naming the listen address is served.
func TestServerRefusesForeignHost(t *testing.T) {
	s := NewServer(NewRecorder(Options{}), nil)
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()
	addr := s.Addr().String()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(host string) (*http.Response, errorBody) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+PathStatus, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body errorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp, body
	}
	_, port, _ := net.SplitHostPort(addr)
	resp, body := get("rebound.example:" + port)
	if resp.StatusCode != http.StatusMisdirectedRequest || !strings.Contains(body.Error, "rebound.example") ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Errorf("foreign Host: %d %q (%s), want 421 with a JSON error naming it", resp.StatusCode, body.Error, resp.Header.Get("Content-Type"))
	}
	for _, host := range []string{addr, "localhost:" + port} {
		if resp, _ := get(host); resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: %d, want 200", host, resp.StatusCode)
		}
	}
}
