package approvals

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/aymanbagabas/go-udiff"
	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// shownFile is a file on disk that a card showed, as it was read: what is
// read again before a yes.
type shownFile struct {
	path   string
	real   string // path with the links in its directories resolved
	exists bool
	sum    [sha256.Size]byte
}

// disk reads the files a file change touches, as codex will find them when
// it applies the changes one after the other: a file an earlier change
// wrote or removed is seen as that change left it. Reads are capped, all
// together, to a budget; anything that is not a plain file, or that cannot
// be read, is a refusal.
type disk struct {
	budget  int
	limit   int
	pending map[string]*string // written (or removed: nil) by earlier changes
	read    []shownFile
}

func newDisk(limit int) *disk {
	return &disk{budget: limit, limit: limit, pending: map[string]*string{}}
}

// file returns the content of path and whether it exists.
func (d *disk) file(path string) (string, bool, error) {
	if content, ok := d.pending[path]; ok {
		if content == nil {
			return "", false, nil
		}
		return *content, true, nil
	}
	content, exists, err := readCapped(path, d.budget)
	if errors.Is(err, errTooLarge) {
		return "", false, refuse("the files this change touches are larger than the %d-byte limit, so it cannot be shown", d.limit)
	}
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is named, escaped, below
	}
	if err != nil {
		return "", false, refuse("%s cannot be shown: %v", line(path), err)
	}
	d.budget -= len(content)
	d.read = append(d.read, shownFile{path: path, real: resolved(path), exists: exists, sum: sha256.Sum256(content)})
	s := string(content)
	d.pending[path] = &s
	if !exists {
		d.pending[path] = nil
	}
	return s, exists, nil
}

// Paths are kept as codex wrote them, not cleaned: the system resolves them
// for codex, and so for these reads, the same way.
func (d *disk) write(path, content string) { d.pending[path] = &content }
func (d *disk) remove(path string)         { d.pending[path] = nil }

var errTooLarge = errors.New("above the limit")

// readCapped reads the regular file at path, at most limit bytes. A path
// that does not exist is no error; a relative path, a symbolic link,
// anything but a regular file, and a file above limit are.
func readCapped(path string, limit int) ([]byte, bool, error) {
	if !filepath.IsAbs(path) {
		return nil, false, errors.New("not an absolute path")
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	// O_NOFOLLOW and O_NONBLOCK: a file swapped for a link or a FIFO since
	// the Lstat neither redirects nor blocks the read.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if info, err = f.Stat(); err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	content, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, false, err
	}
	if len(content) > limit {
		return nil, false, errTooLarge
	}
	return content, true, nil
}

// resolved is path with the symbolic links of its directories resolved, as
// far as they exist: where codex will really write. The agent can swap a
// directory of the workspace for a link at any time, and a file that is
// absent in both places reads the same: the place itself is compared.
func resolved(path string) string {
	dir, rest := filepath.Dir(path), filepath.Base(path)
	for {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return filepath.Clean(path)
		}
		dir, rest = parent, filepath.Join(filepath.Base(dir), rest)
	}
}

// changedOnDisk reads again the files a card showed and returns the first
// that is not as it was shown, or "" when all are. A file that cannot be
// read now counts as changed.
func changedOnDisk(files []shownFile, limit int) string {
	for _, f := range files {
		content, exists, err := readCapped(f.path, limit)
		if err != nil || resolved(f.path) != f.real || exists != f.exists || sha256.Sum256(content) != f.sum {
			return f.path
		}
		limit -= len(content)
	}
	return ""
}

// applyDiff applies codex's diff of an update (unified hunks without file
// headers) to the content on disk, exactly: a hunk whose lines are not
// where it says is an error.
func applyDiff(content, diff string) (string, error) {
	if strings.TrimSpace(diff) == "" {
		return content, nil // a move without changes
	}
	files, _, err := gitdiff.Parse(strings.NewReader("--- a/file\n+++ b/file\n" + diff))
	if err != nil {
		return "", err
	}
	if len(files) != 1 || files[0].IsBinary || len(files[0].TextFragments) == 0 {
		return "", errors.New("not a unified diff of one text file")
	}
	var out bytes.Buffer
	if err := gitdiff.Apply(&out, strings.NewReader(content), files[0]); err != nil {
		return "", err
	}
	return out.String(), nil
}

// unifiedDiff is the diff from old to new with context lines around each
// change (every line with all), without file headers.
func unifiedDiff(old, new string, context int, all bool) string {
	if old == new {
		return " (no change)\n"
	}
	if all {
		context = strings.Count(old, "\n") + 1
	}
	diff, err := udiff.ToUnified("", "", old, udiff.Lines(old, new), context)
	if err != nil {
		// The edits come from udiff.Lines on the same text: they are always
		// consistent. Show the whole change rather than nothing.
		return prefixLines(old, "-") + prefixLines(new, "+")
	}
	// Drop the "--- " and "+++ " lines: the change's own header names the files.
	for range 2 {
		if _, rest, ok := strings.Cut(diff, "\n"); ok && (strings.HasPrefix(diff, "--- ") || strings.HasPrefix(diff, "+++ ")) {
			diff = rest
		}
	}
	return diff
}

// reread is what the re-read before a yes saw: the card whose files were
// read again and found as shown, at that revision.
type reread struct {
	allows   bool
	e        *entry
	revision int
}

// rereadFiles reads again, without the lock, the files the card an answer
// names showed, when the answer would allow it. If any changed, the card
// becomes a new revision built from the files as they are now (or is
// declined when it can no longer be shown), and the answer is refused with
// ErrStale.
func (q *Queue) rereadFiles(a Answer) (reread, error) {
	if !a.Decision.Allows() {
		return reread{}, nil
	}
	q.mu.Lock()
	i, err := q.find(a.Card)
	if err != nil {
		q.mu.Unlock()
		return reread{}, err
	}
	e := q.open[i]
	r := reread{allows: true, e: e, revision: e.card.Revision}
	files, req, lim := e.files, e.req, q.opts.Limits.orDefault()
	q.mu.Unlock()
	if len(files) == 0 {
		return r, nil
	}
	path := changedOnDisk(files, lim.MaxBytes)
	if path == "" {
		return r, nil
	}
	b, berr := rebuild(req, lim)
	q.mu.Lock()
	id := e.card.ID
	if !slices.Contains(q.open, e) || e.card.Revision != r.revision {
		q.mu.Unlock()
		return reread{}, fmt.Errorf("card %s: %w: it changed while its files were read", id, ErrStale) // closed, or revised by a patch update
	}
	why := "its files changed on disk since it was shown (" + line(path) + ")"
	ch, denial := q.revise(e, req, b, berr, lim, why)
	q.notify(ch)
	q.send(denial)
	if ch.Kind == CardUpdated {
		return reread{}, fmt.Errorf("card %s: %w: %s; it is now at revision %d", id, ErrStale, why, ch.Card.Revision)
	}
	return reread{}, fmt.Errorf("card %s: %w: %s", id, ErrClosed, ch.Why)
}

// confirm reports ErrStale unless a yes goes to the card that rereadFiles
// looked at, at the same revision; q.mu is held.
func (r reread) confirm(e *entry) error {
	if r.allows && (r.e != e || e.card.Revision != r.revision) {
		return fmt.Errorf("%w: it changed while the answer was checked", ErrStale)
	}
	return nil
}
