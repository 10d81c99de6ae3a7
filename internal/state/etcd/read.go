package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/infrakit/infrakit/internal/state"
)

// cache holds the decoded parts of the state, by key. A part's key is the
// hash of its value, so a cached part never goes stale: a Read after a
// small change fetches and decodes only the parts that changed (and the
// head). It is pruned to what the last head refers to.
type cache struct {
	chunks map[string][]state.Instance
	groups map[string]*groupRec
	// raw is the meta, ingress and enrollment parts: small, and decoded
	// anew by each Read, because the document hands out their pointers
	// (the stack) for the caller to change.
	raw map[string][]byte
}

func newCache() cache {
	return cache{chunks: map[string][]state.Instance{}, groups: map[string]*groupRec{}, raw: map[string][]byte{}}
}

func (c cache) has(key string) bool {
	_, a := c.chunks[key]
	_, b := c.groups[key]
	_, r := c.raw[key]
	return a || b || r
}

// copyTo puts key's entry, if c has it, into dst.
func (c cache) copyTo(dst cache, key string) bool {
	if v, ok := c.chunks[key]; ok {
		dst.chunks[key] = v
	} else if v, ok := c.groups[key]; ok {
		dst.groups[key] = v
	} else if v, ok := c.raw[key]; ok {
		dst.raw[key] = v
	} else {
		return false
	}
	return true
}

// prune drops what refs does not name.
func (c cache) prune(refs map[string]bool) {
	maps.DeleteFunc(c.chunks, func(k string, _ []state.Instance) bool { return !refs[k] })
	maps.DeleteFunc(c.groups, func(k string, _ *groupRec) bool { return !refs[k] })
	maps.DeleteFunc(c.raw, func(k string, _ []byte) bool { return !refs[k] })
}

// loaded is a state tree as read at one revision.
type loaded struct {
	doc *state.Document // state.NewDocument() when nothing is stored
	// rev is the head's mod revision (0: no head); refs the parts' keys.
	rev  int64
	refs map[string]bool
}

// maxReadAttempts bounds the restarts of a read whose revision was
// compacted between its requests.
const maxReadAttempts = 3

// load reads the tree under k at one revision. For the live tree a
// one-value state of an older infrakit (and no head) is an
// *OldLayoutError.
func (b *Backend) load(ctx context.Context, k keys, live bool) (*loaded, error) {
	for attempt := 1; ; attempt++ {
		l, err := b.loadOnce(ctx, k, live)
		if errors.Is(err, rpctypes.ErrCompacted) && attempt < maxReadAttempts {
			continue
		}
		return l, err
	}
}

func (b *Backend) loadOnce(ctx context.Context, k keys, live bool) (*loaded, error) {
	name := k.root + " in etcd"
	ops := []clientv3.Op{clientv3.OpGet(k.head())}
	if live {
		ops = append(ops, clientv3.OpGet(b.LegacyKey(), clientv3.WithKeysOnly()))
	}
	resp, err := b.client.Txn(ctx).Then(ops...).Commit()
	b.count(1, 0)
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", name, err)
	}
	kv := first(resp.Responses[0].GetResponseRange().Kvs)
	if kv == nil {
		if live && len(resp.Responses[1].GetResponseRange().Kvs) > 0 {
			return nil, &OldLayoutError{State: b.LegacyKey() + " in etcd"}
		}
		return &loaded{doc: state.NewDocument()}, nil
	}
	rev := resp.Header.Revision
	h, err := decodeHead(k.head()+" in etcd", kv.Value)
	if err != nil {
		return nil, err
	}
	// The records first (their parts name the chunks), then the chunks.
	var want []string
	want = append(want, k.part(kindMeta, "", h.Refs.Meta))
	for kind, m := range map[string]map[string]string{kindGroup: h.Refs.Groups, kindIngress: h.Refs.Ingresses, kindEnrollment: h.Refs.Enrollments} {
		for name, hash := range m {
			if hash != "" {
				want = append(want, k.part(kind, name, hash))
			}
		}
	}
	// parts is this read's own view of the parts, so that a concurrent
	// read or write pruning the shared cache takes nothing from under it.
	parts := newCache()
	if err := b.fetch(ctx, name, rev, want, parts); err != nil {
		return nil, err
	}
	refs := refKeys(k, h, func(key string) *groupRec { return parts.groups[key] })
	if err := b.fetch(ctx, name, rev, keysOf(refs), parts); err != nil {
		return nil, err
	}
	doc, err := assemble(name, k, h, parts)
	if err != nil {
		return nil, err
	}
	if live {
		b.mu.Lock()
		b.cache.prune(refs)
		b.mu.Unlock()
	}
	return &loaded{doc: doc, rev: kv.ModRevision, refs: refs}, nil
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// decodeHead checks the head as state.Decode checks a whole document (the
// same messages for a missing version, lineage or serial, a newer format,
// truncated JSON) and reads its references.
func decodeHead(name string, data []byte) (*head, error) {
	if _, err := state.Decode(name, data); err != nil {
		return nil, err
	}
	var h head
	if err := json.Unmarshal(data, &h); err != nil || h.Refs.Meta == "" {
		return nil, &state.InvalidError{State: name, Reason: fmt.Sprintf("has no valid \"refs\" to the parts of the state (%v)", err), Err: err}
	}
	return &h, nil
}

// fetchBatch is how many parts one read request gets (etcd takes at most
// 128 operations in a transaction by default).
const fetchBatch = 100

// fetch puts the parts among want into parts: from the cache, or fetched
// as of rev and decoded (and then cached too). A part the head refers to
// that is gone is damage.
func (b *Backend) fetch(ctx context.Context, name string, rev int64, want []string, parts cache) error {
	b.mu.Lock()
	var missing []string
	for _, key := range want {
		if !b.cache.copyTo(parts, key) {
			missing = append(missing, key)
		}
	}
	b.mu.Unlock()
	for len(missing) > 0 {
		n := min(len(missing), fetchBatch)
		ops := make([]clientv3.Op, n)
		for i, key := range missing[:n] {
			ops[i] = clientv3.OpGet(key, clientv3.WithRev(rev))
		}
		resp, err := b.client.Txn(ctx).Then(ops...).Commit()
		b.count(1, 0)
		if err != nil {
			return fmt.Errorf("read state %s: %w", name, err)
		}
		for i, key := range missing[:n] {
			kv := first(resp.Responses[i].GetResponseRange().Kvs)
			if kv == nil {
				return &state.InvalidError{State: name, Reason: fmt.Sprintf("its head refers to %s, which is missing (damaged?)", key)}
			}
			if err := decodePart(name, b.prefix, key, kv.Value, parts); err != nil {
				return err
			}
			b.mu.Lock()
			parts.copyTo(b.cache, key)
			b.mu.Unlock()
		}
		missing = missing[n:]
	}
	return nil
}

// decodePart decodes one fetched part (key under prefix) into c.
func decodePart(name, prefix, key string, value []byte, c cache) error {
	if hashOf(value) != key[len(key)-32:] {
		return &state.InvalidError{State: name, Reason: fmt.Sprintf("%s does not hold what its name (a hash of it) says (damaged?)", key)}
	}
	var err error
	switch kindOf(key[len(prefix):]) {
	case kindChunk:
		var ins []state.Instance
		if err = json.Unmarshal(value, &ins); err == nil {
			c.chunks[key] = ins
		}
	case kindGroup:
		var rec groupRec
		if err = json.Unmarshal(value, &rec); err == nil {
			c.groups[key] = &rec
		}
	default:
		c.raw[key] = value
	}
	if err != nil {
		return &state.InvalidError{State: name, Reason: fmt.Sprintf("%s cannot be decoded: %v", key, err), Err: err}
	}
	return nil
}

// kindOf is the kind of a part from its key below the prefix
// ("/state/chunk/...", "/state.migrated/group/...").
func kindOf(rel string) string {
	for i := 1; i < len(rel); i++ {
		if rel[i] == '/' {
			rest := rel[i+1:]
			for j := 0; j < len(rest); j++ {
				if rest[j] == '/' {
					return rest[:j]
				}
			}
			return rest
		}
	}
	return ""
}

// assemble builds a fresh document from the head and the cached parts:
// nothing in it is shared with the cache, so the caller may change it.
func assemble(name string, k keys, h *head, c cache) (*state.Document, error) {
	invalid := func(format string, args ...any) error {
		return &state.InvalidError{State: name, Reason: fmt.Sprintf(format, args...)}
	}
	doc := &state.Document{Version: h.Version, Serial: h.Serial, Lineage: h.Lineage}
	var m meta
	if err := json.Unmarshal(c.raw[k.part(kindMeta, "", h.Refs.Meta)], &m); err != nil {
		return nil, invalid("its stack part cannot be decoded: %v", err)
	}
	doc.Stack, doc.Outputs = m.Stack, m.Outputs
	if len(h.Refs.Groups) > 0 {
		doc.Groups = make(map[string]*state.GroupStatus, len(h.Refs.Groups))
	}
	for gname, hash := range h.Refs.Groups {
		if hash == "" {
			doc.Groups[gname] = nil
			continue
		}
		rec := c.groups[k.part(kindGroup, gname, hash)]
		if rec == nil {
			return nil, invalid("the record of group %q is missing", gname)
		}
		g := &state.GroupStatus{Freed: rec.Freed, UpdateStopped: rec.UpdateStopped, Destroying: rec.Destroying}
		if rec.Chunks != nil {
			g.Instances = make([]state.Instance, 0, rec.Count)
			for _, ch := range rec.Chunks {
				g.Instances = append(g.Instances, c.chunks[k.part(kindChunk, gname, ch)]...)
			}
		}
		if len(g.Instances) != rec.Count {
			return nil, invalid("group %q has %d instances in its chunks but its record says %d (damaged?)", gname, len(g.Instances), rec.Count)
		}
		doc.Groups[gname] = g
	}
	var err error
	if doc.Ingresses, err = controllers(k, kindIngress, h.Refs.Ingresses, c); err != nil {
		return nil, invalid("%v", err)
	}
	if doc.Enrollments, err = controllers(k, kindEnrollment, h.Refs.Enrollments, c); err != nil {
		return nil, invalid("%v", err)
	}
	if err := state.CheckStacks(name, doc); err != nil {
		return nil, err
	}
	return doc, nil
}

func controllers(k keys, kind string, m map[string]string, c cache) (map[string]*state.ControllerStatus, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string]*state.ControllerStatus, len(m))
	for name, hash := range m {
		if hash == "" {
			out[name] = nil
			continue
		}
		var rec state.ControllerStatus
		if err := json.Unmarshal(c.raw[k.part(kind, name, hash)], &rec); err != nil {
			return nil, fmt.Errorf("%s %q cannot be decoded: %w", kind, name, err)
		}
		out[name] = &rec
	}
	return out, nil
}

// Read returns the stored document, or state.NewDocument() when there is
// none, read at one revision: the head, then the parts it names that are
// not cached (as of the head's revision). A stored document that would be
// refused is an error matching state.ErrInvalid; a one-value state of an
// older infrakit is an *OldLayoutError (also ErrInvalid) naming
// `infrakit init -migrate-state`.
func (b *Backend) Read(ctx context.Context) (*state.Document, error) {
	l, err := b.load(ctx, b.live(), true)
	if err != nil {
		return nil, err
	}
	if l.rev > 0 {
		b.remember(l.rev, header(l.doc), l.refs)
	}
	return l.doc, nil
}

// Unchanged reports whether the state is still exactly what this Backend
// last read or wrote, with header h (state.Revalidator): one small read of
// the head's mod revision, which every write changes.
func (b *Backend) Unchanged(ctx context.Context, h state.Header) (bool, error) {
	resp, err := b.client.Get(ctx, b.StateKey(), clientv3.WithKeysOnly())
	b.count(1, 0)
	if err != nil {
		return false, fmt.Errorf("read state %s: %w", b.name(), err)
	}
	kv := first(resp.Kvs)
	b.mu.Lock()
	defer b.mu.Unlock()
	return kv != nil && b.seenRev > 0 && kv.ModRevision == b.seenRev && b.seen == h, nil
}
