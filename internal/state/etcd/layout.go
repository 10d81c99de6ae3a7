package etcd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/url"

	"github.com/infrakit/infrakit/internal/config"
	"github.com/infrakit/infrakit/internal/state"
)

// The split layout (see the package comment) is pure data: this file turns
// a document into the head and the content-addressed parts that store it,
// and back. Every part but the head is immutable — its key is the hash of
// its value — so a write only ever adds parts nobody sees yet and then
// swaps the head; what readers see changes only with the head.

// Chunking bounds: a group's instance list is cut where the hash of an
// instance's ID has its low bits zero (content-defined, so inserting or
// removing one instance changes one chunk, not every chunk after it), with
// at least chunkMin and at most chunkMax instances, and about chunkMaxBytes
// at most, per chunk.
const (
	chunkMask     = 127 // about 128 instances per chunk on average
	chunkMin      = 32
	chunkMax      = 512
	chunkMaxBytes = 128 << 10
)

// head is the value of the head key: the document's identity (which
// state.Decode checks as it checks a whole document) and the hash of each
// part. An object whose record is nil has the hash "".
type head struct {
	Version int    `json:"version"`
	Serial  uint64 `json:"serial"`
	Lineage string `json:"lineage"`
	Refs    refs   `json:"refs"`
}

type refs struct {
	// Meta is the part holding the stack and the outputs.
	Meta        string            `json:"meta"`
	Groups      map[string]string `json:"groups,omitempty"`
	Ingresses   map[string]string `json:"ingresses,omitempty"`
	Enrollments map[string]string `json:"enrollments,omitempty"`
}

// meta is the part holding what is not per object.
type meta struct {
	Stack   *config.Stack                 `json:"stack,omitempty"`
	Outputs map[string]config.OutputValue `json:"outputs,omitempty"`
}

// groupRec is a group's part: its flags and the hashes of its chunks, in
// order. Chunks is nil when the group's Instances are (as a stored
// document keeps null apart from []).
type groupRec struct {
	Freed         bool     `json:"freed,omitempty"`
	UpdateStopped bool     `json:"update_stopped,omitempty"`
	Destroying    bool     `json:"destroying,omitempty"`
	Count         int      `json:"count"`
	Chunks        []string `json:"chunks"`
}

// Kinds of parts; each is under root/<kind>/.
const (
	kindMeta       = "meta"
	kindGroup      = "group"
	kindChunk      = "chunk"
	kindIngress    = "ingress"
	kindEnrollment = "enrollment"
)

// keys names the keys of one state tree under root (P/state).
type keys struct{ root string }

func (k keys) head() string    { return k.root + "/head" }
func (k keys) writing() string { return k.root + "/writing/" }

// part is the key of a part: root/meta/<hash>, or root/<kind>/<name>/<hash>
// for an object's (a chunk is its group's). Names are escaped so that one
// name is never a prefix of another's keys.
func (k keys) part(kind, name, hash string) string {
	if kind == kindMeta {
		return k.root + "/meta/" + hash
	}
	return k.root + "/" + kind + "/" + url.PathEscape(name) + "/" + hash
}

// hashOf is the content address of a part's value.
func hashOf(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:16])
}

// marshal is JSON without HTML escaping, as state.Encode writes.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chunkEnds cuts ins into chunks and returns the end index of each.
func chunkEnds(ins []state.Instance) []int {
	var ends []int
	start, size := 0, 0
	for i, in := range ins {
		size += 64 + len(in.ID) + len(in.LogicalID) + len(in.ConfigHash) + len(in.State) + len(in.Address)
		n := i + 1 - start
		if n >= chunkMax || size >= chunkMaxBytes || (n >= chunkMin && idHash(in.ID)&chunkMask == 0) {
			ends = append(ends, i+1)
			start, size = i+1, 0
		}
	}
	if start < len(ins) {
		ends = append(ends, len(ins))
	}
	return ends
}

func idHash(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// put is a part to store.
type put struct {
	key   string
	value []byte
}

// encoded is a document as the split layout stores it.
type encoded struct {
	head  []byte
	refs  map[string]bool // every part's key the head refers to
	parts []put           // parts that base does not refer to
	// chunks and groups are the decoded form of the new parts, for the
	// cache (copies: the document's slices stay the caller's).
	chunks map[string][]state.Instance
	groups map[string]*groupRec
}

// encode lays out doc (already at the serial to store) under k. base is
// what the state refers to now (nil: nothing); a chunk whose instances
// equal those of a chunk base refers to keeps that chunk's key without
// being encoded again — so a write of 100,000 instances that changed one
// encodes about one chunk.
func encode(k keys, doc *state.Document, base map[string]bool, cached func(key string) []state.Instance) (*encoded, error) {
	e := &encoded{refs: map[string]bool{}, chunks: map[string][]state.Instance{}, groups: map[string]*groupRec{}}
	h := head{Version: doc.Version, Serial: doc.Serial, Lineage: doc.Lineage}
	add := func(kind, name string, v any) (string, error) {
		data, err := marshal(v)
		if err != nil {
			return "", fmt.Errorf("encode %s %q: %w", kind, name, err)
		}
		hash := hashOf(data)
		key := k.part(kind, name, hash)
		if !e.refs[key] {
			e.refs[key] = true
			if !base[key] {
				e.parts = append(e.parts, put{key, data})
			}
		}
		return hash, nil
	}
	var err error
	if h.Refs.Meta, err = add(kindMeta, "", meta{Stack: doc.Stack, Outputs: doc.Outputs}); err != nil {
		return nil, err
	}
	if len(doc.Groups) > 0 {
		h.Refs.Groups = map[string]string{}
	}
	for name, g := range doc.Groups {
		if g == nil {
			h.Refs.Groups[name] = ""
			continue
		}
		rec, err := encodeChunks(k, name, g, e, base, cached)
		if err != nil {
			return nil, err
		}
		hash, err := add(kindGroup, name, rec)
		if err != nil {
			return nil, err
		}
		h.Refs.Groups[name] = hash
		e.groups[k.part(kindGroup, name, hash)] = rec
	}
	controllers := func(kind string, recs map[string]*state.ControllerStatus) (map[string]string, error) {
		if len(recs) == 0 {
			return nil, nil
		}
		out := map[string]string{}
		for name, rec := range recs {
			if rec == nil {
				out[name] = ""
				continue
			}
			hash, err := add(kind, name, rec)
			if err != nil {
				return nil, err
			}
			out[name] = hash
		}
		return out, nil
	}
	if h.Refs.Ingresses, err = controllers(kindIngress, doc.Ingresses); err != nil {
		return nil, err
	}
	if h.Refs.Enrollments, err = controllers(kindEnrollment, doc.Enrollments); err != nil {
		return nil, err
	}
	if e.head, err = marshal(h); err != nil {
		return nil, fmt.Errorf("encode head: %w", err)
	}
	return e, nil
}

// encodeChunks chunks a group's instances, adding the chunks base lacks.
func encodeChunks(k keys, name string, g *state.GroupStatus, e *encoded, base map[string]bool, cached func(string) []state.Instance) (*groupRec, error) {
	rec := &groupRec{Freed: g.Freed, UpdateStopped: g.UpdateStopped, Destroying: g.Destroying, Count: len(g.Instances)}
	if g.Instances == nil {
		return rec, nil
	}
	// The chunks base has for this group, by first ID, to reuse unchanged.
	old := map[string][]string{}
	for key := range base {
		if ins := cached(key); len(ins) > 0 && isChunkOf(k, key, name) {
			old[ins[0].ID] = append(old[ins[0].ID], key)
		}
	}
	rec.Chunks = []string{}
	start := 0
	for _, end := range chunkEnds(g.Instances) {
		part := g.Instances[start:end]
		start = end
		if key := reusable(old[part[0].ID], part, cached); key != "" {
			e.refs[key] = true
			rec.Chunks = append(rec.Chunks, key[len(key)-32:])
			continue
		}
		data, err := marshal(part)
		if err != nil {
			return nil, fmt.Errorf("encode group %q: %w", name, err)
		}
		hash := hashOf(data)
		key := k.part(kindChunk, name, hash)
		rec.Chunks = append(rec.Chunks, hash)
		if !e.refs[key] {
			e.refs[key] = true
			if !base[key] {
				e.parts = append(e.parts, put{key, data})
				e.chunks[key] = append([]state.Instance(nil), part...)
			}
		}
	}
	return rec, nil
}

func isChunkOf(k keys, key, group string) bool {
	p := k.root + "/" + kindChunk + "/" + url.PathEscape(group) + "/"
	return len(key) == len(p)+32 && key[:len(p)] == p
}

// reusable is the key among candidates whose cached instances equal part.
func reusable(candidates []string, part []state.Instance, cached func(string) []state.Instance) string {
	for _, key := range candidates {
		ins := cached(key)
		if len(ins) != len(part) {
			continue
		}
		same := true
		for i := range ins {
			if ins[i] != part[i] {
				same = false
				break
			}
		}
		if same {
			return key
		}
	}
	return ""
}

// refKeys is every part's key a head refers to, given the group records
// (which name the chunks).
func refKeys(k keys, h *head, group func(key string) *groupRec) map[string]bool {
	out := map[string]bool{k.part(kindMeta, "", h.Refs.Meta): true}
	for name, hash := range h.Refs.Groups {
		if hash == "" {
			continue
		}
		key := k.part(kindGroup, name, hash)
		out[key] = true
		if rec := group(key); rec != nil {
			for _, c := range rec.Chunks {
				out[k.part(kindChunk, name, c)] = true
			}
		}
	}
	for kind, m := range map[string]map[string]string{kindIngress: h.Refs.Ingresses, kindEnrollment: h.Refs.Enrollments} {
		for name, hash := range m {
			if hash != "" {
				out[k.part(kind, name, hash)] = true
			}
		}
	}
	return out
}
