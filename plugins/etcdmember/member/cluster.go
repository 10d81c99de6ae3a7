package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// cluster talks to an etcd cluster through the official client: each call
// opens a client on the endpoints it needs and closes it, so nothing lives
// between the flavor's calls.
type cluster struct {
	timeout time.Duration
	http    *http.Client
}

func newCluster(timeout time.Duration) *cluster {
	return &cluster{timeout: timeout, http: &http.Client{Timeout: timeout}}
}

// client opens a client on urls; it dials lazily, so it never blocks.
func (c *cluster) client(urls []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   urls,
		DialTimeout: c.timeout,
		Logger:      zap.NewNop(),
	})
}

// Observe asks each of urls, and then each client URL the member list
// names besides (but those of skip), for its status and health, and lists
// the members through the endpoints that answered.
func (c *cluster) Observe(ctx context.Context, urls []string, skip ...string) (Observation, error) {
	urls = slices.DeleteFunc(slices.Clone(urls), func(u string) bool { return slices.Contains(skip, u) })
	var o Observation
	o.Endpoints = c.probe(ctx, urls)
	if !o.Reached() {
		return o, nil
	}
	members, err := c.list(ctx, answering(o.Endpoints))
	if err != nil {
		return o, nil // Members stays nil: the decisions say what that means
	}
	o.Members = members
	var more []string
	for _, m := range members {
		for _, u := range m.ClientURLs {
			if !slices.Contains(urls, u) && !slices.Contains(more, u) && !slices.Contains(skip, u) {
				more = append(more, u)
			}
		}
	}
	o.Endpoints = append(o.Endpoints, c.probe(ctx, more)...)
	return o, nil
}

// answering are the URLs of the endpoints that answered, healthy first.
func answering(es []Endpoint) []string {
	var healthy, reached []string
	for _, e := range es {
		switch {
		case e.Healthy:
			healthy = append(healthy, e.URL)
		case e.Reached:
			reached = append(reached, e.URL)
		}
	}
	return append(healthy, reached...)
}

// probe asks every url at once for its status and its /health.
func (c *cluster) probe(ctx context.Context, urls []string) []Endpoint {
	out := make([]Endpoint, len(urls))
	if len(urls) == 0 {
		return out
	}
	cli, err := c.client(urls)
	if err != nil {
		for i, u := range urls {
			out[i] = Endpoint{URL: u}
		}
		return out
	}
	defer cli.Close()
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			out[i] = Endpoint{URL: u}
			sctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			st, err := cli.Status(sctx, u)
			if err != nil {
				return
			}
			out[i].Reached, out[i].ID, out[i].Learner, out[i].Leader = true, st.Header.GetMemberId(), st.IsLearner, st.Leader
			out[i].Healthy = c.health(ctx, u)
		})
	}
	wg.Wait()
	return out
}

// health is whether url's /health answers {"health": "true"}.
func (c *cluster) health(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/health", nil)
	if err != nil {
		return false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil || json.Unmarshal(body, &h) != nil {
		return false
	}
	return resp.StatusCode == http.StatusOK && h.Health == "true"
}

// Members is the member list, asked through the endpoints that answered
// in o.
func (c *cluster) Members(ctx context.Context, o Observation) ([]Member, error) {
	return c.list(ctx, answering(o.Endpoints))
}

// list is the member list, asked through urls.
func (c *cluster) list(ctx context.Context, urls []string) ([]Member, error) {
	cli, err := c.client(urls)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// Serializable: a member answers from what it knows, with or without
	// a quorum, which is when the list matters most.
	resp, err := cli.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		return nil, fmt.Errorf("list members: %w", err)
	}
	return members(resp.Members), nil
}

// members converts etcd's member list.
func members(in []*etcdserverpb.Member) []Member {
	out := make([]Member, 0, len(in))
	for _, m := range in {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	return out
}

// Remove removes members by ID through the endpoints that answered in o,
// other than theirs: a member asked to remove itself stops before it
// answers ("server stopped"), so whether it did is not known.
func (c *cluster) Remove(ctx context.Context, o Observation, ids []uint64) error {
	others := slices.DeleteFunc(slices.Clone(o.Endpoints), func(e Endpoint) bool { return slices.Contains(ids, e.ID) })
	urls := answering(others)
	if len(urls) == 0 {
		return fmt.Errorf("no other member answers to remove members %s through", strings.Join(hexIDs(ids), ", "))
	}
	cli, err := c.client(urls)
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, id := range ids {
		err := c.reconfigure(ctx, func(ctx context.Context) error {
			_, err := cli.MemberRemove(ctx, id)
			return err
		})
		if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
			return fmt.Errorf("remove member %x: %w", id, err)
		}
	}
	return nil
}

// Reconfiguration retries: etcd refuses to add a voting member ("unhealthy
// cluster") until every voting member has been connected for its health
// interval (5 s), so a second member added right after a first waits for
// the first to start; it refuses a removal while too few of the members
// left have been connected that long, as just after a member joined. That
// passes by itself, so the change is tried again, every reconfigureEvery
// for up to reconfigureFor; so is a try that ran out of time while the
// cluster was busy (a retried add that had been made is found by its peer
// URL: ErrPeerURLExist).
const (
	reconfigureEvery = 500 * time.Millisecond
	reconfigureFor   = time.Minute
)

// retryable reports whether a reconfiguration that failed with err may be
// tried again: etcd said the cluster is not ready, or the try (not ctx)
// ran out of time.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return errors.Is(err, rpctypes.ErrUnhealthy) || errors.Is(err, rpctypes.ErrMemberNotEnoughStarted) ||
		errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) || errors.Is(err, context.DeadlineExceeded)
}

// reconfigure runs change (each try bounded by the timeout), again while
// etcd answers that the cluster is not ready for it.
func (c *cluster) reconfigure(ctx context.Context, change func(context.Context) error) error {
	deadline := time.Now().Add(reconfigureFor)
	for {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		err := change(cctx)
		cancel()
		if err == nil || !retryable(ctx, err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(reconfigureEvery):
		}
	}
}

// Add adds a member with peerURL through the endpoints that answered in o.
func (c *cluster) Add(ctx context.Context, o Observation, peerURL string) ([]Member, error) {
	cli, err := c.client(answering(o.Endpoints))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	var added *clientv3.MemberAddResponse
	err = c.reconfigure(ctx, func(ctx context.Context) error {
		added, err = cli.MemberAdd(ctx, []string{peerURL})
		return err
	})
	if errors.Is(err, rpctypes.ErrPeerURLExist) {
		return nil, nil // added by an earlier Prepare
	}
	if err != nil {
		return nil, fmt.Errorf("add member %s: %w", peerURL, err)
	}
	return members(added.Members), nil
}

// MoveLeader asks the leader, at its client URL from, to hand leadership
// to the member to.
func (c *cluster) MoveLeader(ctx context.Context, from string, to uint64) error {
	cli, err := c.client([]string{from})
	if err != nil {
		return err
	}
	defer cli.Close()
	mctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := cli.MoveLeader(mctx, to); err != nil {
		return fmt.Errorf("move leadership to %x: %w", to, err)
	}
	return nil
}
