package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/election"
)

// Options configure a Session.
type Options struct {
	// Prefix is the stack's key prefix (keys go under Prefix+"/members/"
	// and Prefix+"/owners/").
	Prefix string
	// TTL is the session lease's time to live (election.DefaultTTL when
	// zero): a process that dies loses its objects after about TTL.
	TTL time.Duration
	// Margin is how long before its lease would run out a process that
	// cannot renew it stops acting (see election.Options.Margin).
	Margin time.Duration
}

// Member is one live scale-out process, as P/members/<id> says.
type Member struct {
	// ID is the member's session lease ID in hex.
	ID string `json:"id"`
	// Identity is what the process joined with (host name and address).
	Identity string `json:"identity"`
	// Started is when it joined, by its clock.
	Started time.Time `json:"started"`
}

// memberValue is the JSON value of P/members/<id>.
type memberValue struct {
	Identity string    `json:"identity"`
	Started  time.Time `json:"started"`
}

// Session is this process's membership: a lease kept alive (an
// election.Lease) and P/members/<id> attached to it. Objects it acquires
// are attached to the same lease, so they are all released at once when
// the process dies or is cut off. Always call Leave, lost or not.
type Session struct {
	client   *clientv3.Client
	prefix   string // without the trailing slash
	identity string
	id       string
	lease    *election.Lease
}

// Join starts a session: it grants a lease and creates P/members/<id>
// holding identity. ctx bounds the joining only; the session lasts until
// Lost or Leave.
func Join(ctx context.Context, client *clientv3.Client, opts Options, identity string) (*Session, error) {
	prefix := strings.TrimSuffix(opts.Prefix, "/")
	lease, err := election.GrantLease(ctx, client, opts.TTL, opts.Margin)
	if err != nil {
		return nil, fmt.Errorf("ownership %s: join: %w", prefix, err)
	}
	s := &Session{
		client:   client,
		prefix:   prefix,
		identity: identity,
		id:       fmt.Sprintf("%x", int64(lease.ID())),
		lease:    lease,
	}
	value, err := json.Marshal(memberValue{Identity: identity, Started: time.Now().UTC()})
	if err != nil {
		return nil, errors.Join(err, s.Leave(ctx))
	}
	if _, err := client.Put(ctx, s.memberKey(), string(value), clientv3.WithLease(lease.ID())); err != nil {
		// Bounded: etcd may be what failed; the lease expires anyway.
		rctx, cancel := context.WithTimeout(context.Background(), lease.TTL())
		defer cancel()
		_ = s.Leave(rctx)
		return nil, fmt.Errorf("ownership %s: join: put member key: %w", prefix, err)
	}
	return s, nil
}

func (s *Session) memberKey() string { return s.prefix + membersDir + s.id }

// ownerKey is P/owners/<kind>/<name>.
func (s *Session) ownerKey(o Object) string { return s.prefix + ownersDir + o.String() }

// ID is this member's id (its lease ID in hex).
func (s *Session) ID() string { return s.id }

// Identity is what this member joined with.
func (s *Session) Identity() string { return s.identity }

// Prefix is the stack prefix the session works under.
func (s *Session) Prefix() string { return s.prefix }

// TTL is the session lease's time to live as etcd granted it.
func (s *Session) TTL() time.Duration { return s.lease.TTL() }

// Lost is closed when the session ends: its lease expired or was revoked,
// its renewal is overdue by the margin (etcd may still hold it for up to
// the margin: stop acting now), or Leave was called. Every object the
// session held counts as released then. Err says why.
func (s *Session) Lost() <-chan struct{} { return s.lease.Lost() }

// Context is done when Lost is closed: derive the contexts of the work
// done on owned objects from it.
func (s *Session) Context() context.Context { return s.lease.Context() }

// Err is why the session ended (election.ErrLeaseLost,
// election.ErrRenewalOverdue, election.ErrResigned after Leave), or nil.
func (s *Session) Err() error { return s.lease.Err() }

// Standing reports, without asking etcd, whether the session still stands
// as far as this process can tell (see election.Lease.Standing): gate
// every action on an owned object on it.
func (s *Session) Standing() bool { return s.lease.Standing() }

// Leave ends the session at once: it revokes the lease, which deletes the
// member key and every owner key of this session, so others take its
// objects within one round trip (use it on SIGTERM). Stop acting on the
// objects first (Balancer.Run returns once it has). Safe after Lost and
// more than once.
func (s *Session) Leave(ctx context.Context) error {
	if err := s.lease.Revoke(ctx); err != nil {
		return fmt.Errorf("ownership %s: leave %s: %w", s.prefix, s.id, err)
	}
	return nil
}

// Members reads the live members, sorted by ID.
func (s *Session) Members(ctx context.Context) ([]Member, error) {
	v, err := s.View(ctx)
	if err != nil {
		return nil, err
	}
	return v.Members, nil
}

// HasMembers reports whether any scale-out member is live under prefix:
// a leader-mode watch must not act then (the two modes never act at
// once).
func HasMembers(ctx context.Context, client *clientv3.Client, prefix string) (bool, error) {
	key := strings.TrimSuffix(prefix, "/") + membersDir
	resp, err := client.Get(ctx, key, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, fmt.Errorf("ownership %s: read members: %w", prefix, err)
	}
	return resp.Count > 0, nil
}
