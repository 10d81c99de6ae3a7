package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// File is one file of a build context.
type File struct {
	Name string // path inside the context: "Dockerfile", "bin/server"
	Mode int64  // 0o755 for executables
	Data []byte
}

// BuildTimeout bounds an image build (the Client's Timeout is for quick calls).
const BuildTimeout = 5 * time.Minute

// ImageBuild builds an image tagged tag from a context holding files (one of
// them the Dockerfile) with the Engine's builder (POST /build): no CLI, no
// BuildKit, no registry when the Dockerfile needs none (FROM scratch).
func (c *Client) ImageBuild(ctx context.Context, tag string, files []File) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("build %s: context: %w", tag, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return fmt.Errorf("build %s: context: %w", tag, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("build %s: context: %w", tag, err)
	}

	ctx, cancel := context.WithTimeout(ctx, BuildTimeout)
	defer cancel()
	q := url.Values{"t": {tag}, "rm": {"1"}, "forcerm": {"1"}, "q": {"1"}}
	resp, err := c.open(ctx, request{method: http.MethodPost, path: "/build", query: q, body: &buf, ctype: "application/x-tar"})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer resp.Body.Close()
	// The answer is a stream of JSON messages; a failed step is one with
	// "error" (the HTTP status is already 200 by then).
	dec := json.NewDecoder(resp.Body)
	var out strings.Builder
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("build %s: reading the build output: %w", tag, err)
		}
		out.WriteString(m.Stream)
		if m.Error != "" {
			return fmt.Errorf("build %s: %s\n%s", tag, m.Error, out.String())
		}
	}
}
