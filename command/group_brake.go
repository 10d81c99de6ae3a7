package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/infrakit/infrakit/internal/api"
	"github.com/infrakit/infrakit/internal/operation"
	"github.com/infrakit/infrakit/internal/watch"
	"github.com/infrakit/infrakit/internal/watch/status"
)

// watchAskTimeout bounds the question to a running watch: describe must
// not hang on a watch that does not answer.
const watchAskTimeout = 2 * time.Second

// watchGroup asks the watch running on the working directory's local state
// (its lock file names where it serves) for group's status: what only the
// watch knows, such as the mass-failure brake. ok is false when no watch
// answers, or the state is on etcd (where several watch processes take
// turns: their /v1/status answers it).
func (m *Meta) watchGroup(ctx context.Context, group string) (g status.Group, from watch.Holder, ok bool) {
	data, err := os.ReadFile(filepath.Join(m.WorkDir, operation.StateFile+watch.LockSuffix))
	if err != nil || json.Unmarshal(data, &from) != nil || from.Listen == "" {
		return g, from, false
	}
	ctx, cancel := context.WithTimeout(ctx, watchAskTimeout)
	defer cancel()
	scheme := from.Scheme
	if scheme == "" {
		scheme = "http"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+from.Listen+"/v1/status", nil)
	if err != nil {
		return g, from, false
	}
	if token := localToken(from); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g, from, false // a watch that left its file behind
	}
	defer resp.Body.Close()
	var st status.Status
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&st) != nil {
		return g, from, false
	}
	for _, sg := range st.Groups {
		if sg.Name == group {
			return sg, from, true
		}
	}
	return g, from, false
}

// localToken is the API token of the watch from, as it chose it: its
// token file, else INFRAKIT_TOKEN ("" when neither is there: a
// -public-read watch needs none).
func localToken(from watch.Holder) string {
	src := api.TokenSource{File: from.TokenFile, Env: os.Getenv(api.TokenEnv)}
	if src.File == "" && src.Env == "" {
		return ""
	}
	token, _, err := api.LoadToken(src)
	if err != nil {
		return ""
	}
	return token
}

// brakeLine is group describe's line about the brake, as the watch running
// reports it.
func brakeLine(b status.Brake, from watch.Holder) string {
	by := fmt.Sprintf("watch pid %d at %s", from.PID, from.Listen)
	switch {
	case b.Engaged && b.ReleaseAt != nil:
		return fmt.Sprintf("Brake: engaged since %s (%s); replacement paused until a confirming re-list, not before %s (%s)",
			b.Since.UTC().Format(time.RFC3339), b.Reason, b.ReleaseAt.UTC().Format(time.RFC3339), by)
	case b.Engaged:
		return fmt.Sprintf("Brake: engaged since %s (%s); replacement paused (%s)", b.Since.UTC().Format(time.RFC3339), b.Reason, by)
	case b.RateLimit > 0:
		return fmt.Sprintf("Brake: released; replacements at most %d per settle time until none is owed (%s)", b.RateLimit, by)
	}
	return fmt.Sprintf("Brake: off (%s)", by)
}
