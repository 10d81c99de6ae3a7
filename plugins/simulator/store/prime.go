package store

import (
	"fmt"
	"sync"
)

// maxPrimed bounds the objects a Cache remembers between two listings.
const maxPrimed = 1 << 17

// primedSet holds objects this process created since the cache's last
// listing, with the version of the file each was written to: the next
// listing takes them (inotify names their files as changed) and, for each
// file still of that version, uses the value instead of reading and
// decoding the file. An apply of 10,000 instances lists the collection on
// every poll of the executor; without this, each poll read and decoded
// every instance created since the last one.
type primedSet[T any] struct {
	mu         sync.Mutex
	collection string
	objs       map[string]cached[T]
}

func (p *primedSet[T]) add(collection, name string, r cached[T]) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.collection != collection {
		p.collection, p.objs = collection, nil
	}
	if p.objs == nil {
		p.objs = map[string]cached[T]{}
	}
	if len(p.objs) < maxPrimed {
		p.objs[name] = r
	}
}

// take returns the objects primed for collection and forgets them all.
func (p *primedSet[T]) take(collection string) map[string]cached[T] {
	p.mu.Lock()
	defer p.mu.Unlock()
	objs := p.objs
	p.objs = nil
	if p.collection != collection {
		return nil
	}
	return objs
}

// CreateCached is Create that also tells c (nil: nobody) about the new
// object, so that c's next listing uses v rather than reading and decoding
// the file it was just written to. The listing still checks the file's
// version (a stat), so a change by anyone since is read as usual; only a
// person rewriting the file in place in the microseconds between its link
// and its stat could go unseen, until the file changes again. Nothing is
// remembered while c has not listed the collection yet: nobody reads it.
func CreateCached[T any](s *Store, key Key, v T, c *Cache[T]) error {
	b, err := encode(v)
	if err != nil {
		return fmt.Errorf("store: encode %s: %w", key, err)
	}
	ver, err := s.create(key, b)
	if err != nil {
		return err
	}
	if c == nil || ver == (version{}) {
		return nil
	}
	if snap := c.snap.Load(); snap != nil && snap.collection == key.Collection {
		c.primed.add(key.Collection, key.Name, cached[T]{version: ver, value: v})
	}
	return nil
}
