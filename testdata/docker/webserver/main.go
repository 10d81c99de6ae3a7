// Command webserver is the small HTTP server inside the image the docker
// provider's tests and `make demo-docker` run (infrakit-docker-web, built
// FROM scratch around this static binary). Unlike testdata/webserver, which
// serves on 127.0.0.1 for process instances, it listens on every interface:
// a container is reached at its own IP.
//
//	PORT            port to listen on (default 8080)
//	WEBSERVER_FAIL  "1": GET /health always answers 500
//
// GET / answers "instance <hostname> port <port>\n" (a container's hostname
// is its short ID, the instance ID); GET /health answers "ok\n" (200) or
// "failing\n" (500). POST /fail makes /health fail from then on and POST
// /recover undoes it: there is no shell in the image to touch a file with,
// so this is how tests make a running container unhealthy. SIGTERM or
// SIGINT shut it down gracefully (requests in flight get up to 2 s).
//
// Build: CGO_ENABLED=0 go build -o webserver ./testdata/docker/webserver
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
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	// As PID 1 in a container, a signal with no handler is ignored, so a
	// `docker stop` right after the start would wait out its whole grace:
	// install the handler before anything else.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.SetPrefix("webserver: ")
	if err := run(ctx); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	port := 8080
	if s := os.Getenv("PORT"); s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("PORT=%q: want a port number", s)
		}
		port = p
	}
	host, _ := os.Hostname()
	var failing atomic.Bool
	failing.Store(os.Getenv("WEBSERVER_FAIL") == "1")

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "instance %s port %d\n", host, port)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "failing", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, r *http.Request) {
		failing.Store(true)
		fmt.Fprintln(w, "failing")
	})
	mux.HandleFunc("POST /recover", func(w http.ResponseWriter, r *http.Request) {
		failing.Store(false)
		fmt.Fprintln(w, "ok")
	})

	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("instance %q listening on %s", host, ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
