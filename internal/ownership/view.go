package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
)

// Owner is who holds an object, as P/owners/<kind>/<name> says.
type Owner struct {
	// Member is the owner's member id. It may name a member that is gone
	// (its member key deleted while its lease is in doubt): nobody else
	// takes the object until the key expires.
	Member string `json:"member"`
	// Fence is the owner key and its create revision.
	Fence election.Fence `json:"fence"`
}

// View is the members and the owners of a stack, read at one revision.
// (It is no JSON document: /v1/status shows its own shape of it.)
type View struct {
	// Revision is the etcd revision the view was read at.
	Revision int64
	// Members are the live members, sorted by ID.
	Members []Member
	// Owners are the owner keys that exist, by object.
	Owners map[Object]Owner
}

// Member returns the member of id, if it is live.
func (v View) Member(id string) (Member, bool) {
	i, ok := slices.BinarySearchFunc(v.Members, id, func(m Member, id string) int { return strings.Compare(m.ID, id) })
	if !ok {
		return Member{}, false
	}
	return v.Members[i], true
}

// Owner returns who holds o, if anyone.
func (v View) Owner(o Object) (Owner, bool) {
	ow, ok := v.Owners[o]
	return ow, ok
}

// View reads the members and owners at one revision.
func (s *Session) View(ctx context.Context) (View, error) {
	resp, err := s.client.Txn(ctx).Then(
		clientv3.OpGet(s.prefix+membersDir, clientv3.WithPrefix()),
		clientv3.OpGet(s.prefix+ownersDir, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return View{}, fmt.Errorf("ownership %s: read members and owners: %w", s.prefix, err)
	}
	v := View{Revision: resp.Header.Revision, Owners: map[Object]Owner{}}
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		m := Member{ID: strings.TrimPrefix(string(kv.Key), s.prefix+membersDir)}
		var val memberValue
		// A value that does not parse still names a live member.
		if json.Unmarshal(kv.Value, &val) == nil {
			m.Identity, m.Started = val.Identity, val.Started
		}
		v.Members = append(v.Members, m)
	}
	slices.SortFunc(v.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		o, ok := parseObject(strings.TrimPrefix(string(kv.Key), s.prefix+ownersDir))
		if !ok {
			continue // not an owner key of ours
		}
		v.Owners[o] = Owner{Member: string(kv.Value), Fence: election.Fence{Key: string(kv.Key), Revision: kv.CreateRevision}}
	}
	return v, nil
}

// Observe sends the view every time members or owners change, starting
// with the current one. A slow reader only misses intermediate views,
// never the latest. When etcd cannot be read it tries again every retry
// (a second when zero). The channel is closed when ctx is done (the
// goroutine behind it stops then).
func (s *Session) Observe(ctx context.Context, retry time.Duration) <-chan View {
	if retry <= 0 {
		retry = time.Second
	}
	out := make(chan View)
	go s.observe(ctx, out, retry)
	return out
}

func (s *Session) observe(ctx context.Context, out chan<- View, retry time.Duration) {
	defer close(out)
	for {
		v, err := s.View(ctx)
		if err != nil {
			t := time.NewTimer(retry)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		select {
		case out <- v:
		case <-ctx.Done():
			return
		}
		if !s.waitChange(ctx, v.Revision+1) {
			return
		}
	}
}

// waitChange waits for any event under members/ or owners/ from rev on.
// It reports false when ctx is done.
func (s *Session) waitChange(ctx context.Context, rev int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	members := s.client.Watch(wctx, s.prefix+membersDir, clientv3.WithPrefix(), clientv3.WithRev(rev))
	owners := s.client.Watch(wctx, s.prefix+ownersDir, clientv3.WithPrefix(), clientv3.WithRev(rev))
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case wr, ok = <-members:
		case wr, ok = <-owners:
		}
		if !ok {
			return ctx.Err() == nil
		}
		if len(wr.Events) > 0 || wr.Err() != nil {
			// On an error (compaction), reading again is the recovery.
			return ctx.Err() == nil
		}
	}
}
