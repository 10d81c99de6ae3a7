// Command webserver is the small HTTP server the process provider's tests,
// the real-provider stack (testdata/real) and `make demo-real` run as
// instances.
//
//	PORT                   port to listen on, on 127.0.0.1 (required)
//	INFRAKIT_INSTANCE_ID   reported by GET / (the process provider sets it)
//	WEBSERVER_FAIL_FILE    while this file exists, GET /health answers 500
//	WEBSERVER_FAIL=1       GET /health always answers 500
//
// GET / answers "instance <id> pid <pid> port <port>\n"; GET /health answers
// "ok\n" (200) or "failing\n" (500). GET /metrics serves, in Prometheus's
// text format, the counter web_requests_total: every request the server has
// answered except GET /metrics and GET /health, so scrapes and health
// checks never count as load (an autoscale check reads the load as
// sum(rate(web_requests_total[30s]))). It has no labels, so it is exported
// as 0 from the start and a new member's rate is known at once. SIGTERM or
// SIGINT shut it down gracefully: requests in flight finish (for up to
// 5 s), then it exits 0.
//
// Build: go build -o bin/webserver ./testdata/webserver
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	log.SetPrefix("webserver: ")
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	port, err := strconv.Atoi(os.Getenv("PORT"))
	if err != nil || port <= 0 || port > 65535 {
		return fmt.Errorf("PORT=%q: want a port number", os.Getenv("PORT"))
	}
	id := os.Getenv("INFRAKIT_INSTANCE_ID")
	failFile := os.Getenv("WEBSERVER_FAIL_FILE")
	failAlways := os.Getenv("WEBSERVER_FAIL") == "1"

	app := http.NewServeMux()
	app.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "instance %s pid %d port %d\n", id, os.Getpid(), port)
	})
	// A registry of its own: the counter alone, none of the default
	// registry's Go and process metrics.
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "web_requests_total",
		Help: "Requests answered, except GET /metrics and GET /health.",
	})
	reg.MustRegister(requests)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		app.ServeHTTP(w, r)
		requests.Inc()
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if failing(failFile, failAlways) {
			http.Error(w, "failing", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})

	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("instance %q listening on %s (pid %d)", id, ln.Addr(), os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	log.Printf("shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// failing reports whether /health should fail now.
func failing(file string, always bool) bool {
	if always {
		return true
	}
	if file == "" {
		return false
	}
	_, err := os.Stat(file)
	return err == nil
}
