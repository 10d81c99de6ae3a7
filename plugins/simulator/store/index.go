package store

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"

	"github.com/infrakit/infrakit/sdk/atomicfile"
)

// A collection's index (<collection>/.index, invisible as every dot file
// is) keeps the decoded object of each file version a Cache listed, so
// that a provider started afresh (the CLI starts one per command) stats
// each file instead of reading and decoding it: for 10,000 instances the
// first listing was 330 ms of CPU, nearly all of it reading and decoding
// JSON. It is only a hint. An entry is used only for a file whose version
// (inode, size, mtime, ctime) is still the one it names, so a file
// changed since is read as usual; an index that does not decode, or was
// written for another format, collection or object type, is ignored; a
// lost or torn one (it is not synced, as objects are not) costs only the
// reads it would have spared.
//
// A Cache writes it after a full listing that read indexMinReads files or
// more: the listing that had to read them pays once for the next
// processes. gob encodes the objects, about ten times cheaper to decode
// than JSON; an object it would not give back equal (an empty slice comes
// back nil) is left out and read from its file.

const (
	indexName     = ".index"
	indexFormat   = 1
	indexMinReads = 256
)

// indexHeader opens an index; an index whose header differs is ignored.
type indexHeader struct {
	Format     int
	Collection string
	Type       string // the object type's Go name
}

type indexEntry[T any] struct {
	Name                    string
	Ino, Size, Mtime, Ctime int64
	Value                   T
}

func headerFor[T any](collection string) indexHeader {
	return indexHeader{Format: indexFormat, Collection: collection, Type: reflect.TypeFor[T]().String()}
}

func (s *Store) indexPath(collection string) string {
	return filepath.Join(s.dir(collection), indexName)
}

// loadIndex returns the entries of collection's index, or nil.
func loadIndex[T any](s *Store, collection string) map[string]cached[T] {
	b, err := os.ReadFile(s.indexPath(collection))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("not using the listing index", "collection", collection, "error", err)
		}
		return nil
	}
	files := map[string]cached[T]{}
	err = eachIndexEntry(b, collection, func(e indexEntry[T]) {
		files[e.Name] = cached[T]{version: version{ino: e.Ino, size: e.Size, mtime: e.Mtime, ctime: e.Ctime}, value: e.Value}
	})
	if err != nil {
		// Entries before the damage are as good as any: each is checked
		// against its file's version.
		s.log.Debug("listing index damaged", "collection", collection, "entries", len(files), "error", err)
	}
	return files
}

// eachIndexEntry decodes an index and calls f with each entry in turn.
func eachIndexEntry[T any](b []byte, collection string, f func(indexEntry[T])) error {
	dec := gob.NewDecoder(bytes.NewReader(b))
	var h indexHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("index header: %w", err)
	}
	if want := headerFor[T](collection); h != want {
		return fmt.Errorf("index of %+v, want %+v", h, want)
	}
	for {
		var e indexEntry[T]
		switch err := dec.Decode(&e); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("index entry: %w", err)
		}
		f(e)
	}
}

// encodeIndex encodes the entries of snap that keep says to keep.
func encodeIndex[T any](collection string, snap *snapshot[T], keep func(i int, r cached[T]) bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := enc.Encode(headerFor[T](collection)); err != nil {
		return nil, err
	}
	for i, n := range snap.names {
		r := snap.files[n]
		if !keep(i, r) {
			continue
		}
		v := r.version
		if err := enc.Encode(indexEntry[T]{Name: n, Ino: v.ino, Size: v.size, Mtime: v.mtime, Ctime: v.ctime, Value: r.value}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// writeIndex replaces collection's index with snap's objects, leaving out
// the corrupt, those kept while being rewritten, and those gob does not
// give back equal. Entries are encoded and checked one at a time, so that
// a provider listing 10,000 objects holds no second copy of them.
func writeIndex[T any](s *Store, collection string, snap *snapshot[T]) error {
	usable := func(_ int, r cached[T]) bool { return !r.corrupt && !r.kept }
	b, err := encodeIndex(collection, snap, usable)
	if err != nil {
		return fmt.Errorf("encode the listing index of %s: %w", collection, err)
	}
	unfaithful := map[string]bool{}
	decoded := 0
	err = eachIndexEntry(b, collection, func(e indexEntry[T]) {
		decoded++
		if r := snap.files[e.Name]; !reflect.DeepEqual(e.Value, r.value) {
			unfaithful[e.Name] = true
		}
	})
	if err != nil {
		return fmt.Errorf("decode the listing index of %s after %d entries: %w", collection, decoded, err)
	}
	if len(unfaithful) > 0 {
		b, err = encodeIndex(collection, snap, func(i int, r cached[T]) bool { return usable(i, r) && !unfaithful[snap.names[i]] })
		if err != nil {
			return fmt.Errorf("encode the listing index of %s: %w", collection, err)
		}
	}
	if err := atomicfile.WriteFileOpts(s.indexPath(collection), b, objectPerm, atomicfile.Options{NoSync: true}); err != nil {
		return fmt.Errorf("write the listing index of %s: %w", collection, err)
	}
	return nil
}
