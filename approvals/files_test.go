package approvals

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type change struct {
	Path string `json:"path"`
	Kind struct {
		Type     string  `json:"type"`
		MovePath *string `json:"move_path,omitempty"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

func mkChange(kind, path, diff string, move ...string) change {
	var c change
	c.Path, c.Kind.Type, c.Diff = path, kind, diff
	if len(move) > 0 {
		c.Kind.MovePath = &move[0]
	}
	return c
}

func fileChangeRequest(changes ...change) Request {
	item, _ := json.Marshal(map[string]any{"type": "fileChange", "id": "call_resp_0", "changes": changes})
	return req(MethodFileChangeApproval, fileChangeParams, string(item))
}

func TestFileChangesAsTheyWillLand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keys := write("authorized_keys", "ssh-ed25519 AAAAmine me\n")
	notes := write("notes.txt", "one\ntwo\nthree\n")
	src := write("x", "a\nb\nc\nd\n")
	taken := write("taken", "old 1\nold 2\n")
	gone := write("gone.txt", "bye\n\tindented\n")
	fresh := filepath.Join(dir, "fresh.txt")
	dest := filepath.Join(dir, "out", "rc.sh")
	for _, tc := range []struct {
		name    string
		req     Request
		diff    string
		changes []FileChange
		files   []string // read, in order
	}{
		{
			name: "add of a new file", req: fileChangeRequest(mkChange("add", fresh, "hello\n")),
			diff:    "*** add " + fresh + "\n+hello\n",
			changes: []FileChange{{Path: fresh, Kind: "add"}}, files: []string{fresh},
		},
		{
			name: "add over an existing file", req: fileChangeRequest(mkChange("add", keys, "ssh-ed25519 AAAAevil x\n")),
			diff:    "*** add " + keys + " (replaces an existing file)\n@@ -1 +1 @@\n-ssh-ed25519 AAAAmine me\n+ssh-ed25519 AAAAevil x\n",
			changes: []FileChange{{Path: keys, Kind: "add", Replaces: true}}, files: []string{keys},
		},
		{
			name: "update against the disk", req: fileChangeRequest(mkChange("update", notes, "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n")),
			diff:    "*** update " + notes + " (replaces an existing file)\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
			changes: []FileChange{{Path: notes, Kind: "update", Replaces: true}}, files: []string{notes},
		},
		{
			name: "move shows the whole file and the removal", req: fileChangeRequest(mkChange("update", src, "@@ -2,2 +2,2 @@\n b\n-c\n+C\n", dest)),
			diff:    "*** move " + src + " -> " + dest + "\n*** write " + dest + ": the whole file as it will be written\n+a\n+b\n+C\n+d\n*** delete " + src + ": moved to " + dest + "\n",
			changes: []FileChange{{Path: src, Kind: "move", MovePath: dest}}, files: []string{src, dest},
		},
		{
			name: "move onto an existing file", req: fileChangeRequest(mkChange("update", src, "", taken)),
			diff:    "*** move " + src + " -> " + taken + " (replaces an existing file)\n*** write " + taken + ": the whole file as it will be written\n@@ -1,2 +1,4 @@\n-old 1\n-old 2\n+a\n+b\n+c\n+d\n*** delete " + src + ": moved to " + taken + "\n",
			changes: []FileChange{{Path: src, Kind: "move", MovePath: taken, Replaces: true}}, files: []string{src, taken},
		},
		{
			name: "delete shows what is on disk", req: fileChangeRequest(mkChange("delete", gone, "stale\n")),
			diff:    "*** delete " + gone + "\n-bye\n-\tindented\n",
			changes: []FileChange{{Path: gone, Kind: "delete"}}, files: []string{gone},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := build(tc.req, DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			if b.card.Diff != tc.diff {
				t.Errorf("diff:\n%s\nwant:\n%s", b.card.Diff, tc.diff)
			}
			if len(b.card.Changes) != len(tc.changes) {
				t.Fatalf("changes %+v", b.card.Changes)
			}
			for i, ch := range tc.changes {
				if b.card.Changes[i] != ch {
					t.Errorf("change %d = %+v, want %+v", i, b.card.Changes[i], ch)
				}
			}
			var read []string
			for _, f := range b.files {
				read = append(read, f.path)
			}
			if strings.Join(read, " ") != strings.Join(tc.files, " ") {
				t.Errorf("read %q, want %q", read, tc.files)
			}
			if got := changedOnDisk(b.files, DefaultLimits.MaxBytes); got != "" {
				t.Errorf("%s reads as changed", got)
			}
		})
	}
}

func TestFileChangesRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("one\ntwo\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(notes, link)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte(strings.Repeat("x\n", 3000)), 0o600)
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		req  Request
		why  string
	}{
		{"relative path", fileChangeRequest(mkChange("add", "notes.txt", "x\n")), "not an absolute path"},
		{"relative move", fileChangeRequest(mkChange("update", notes, "", "out/rc.sh")), "not an absolute path"},
		{"symbolic link", fileChangeRequest(mkChange("add", link, "x\n")), "not a regular file"},
		{"directory", fileChangeRequest(mkChange("add", dir, "x\n")), "not a regular file"},
		{"fifo", fileChangeRequest(mkChange("add", fifo, "x\n")), "not a regular file"},
		{"above max_bytes", fileChangeRequest(mkChange("add", big, "x\n")), "larger than the 4096-byte limit"},
		{"above max_bytes together", fileChangeRequest(mkChange("delete", notes, ""), mkChange("delete", big, "")), "larger than the 4096-byte limit"},
		{"update of a missing file", fileChangeRequest(mkChange("update", missing, "@@ -1 +1 @@\n-a\n+b\n")), "does not exist"},
		{"delete of a missing file", fileChangeRequest(mkChange("delete", missing, "a\n")), "does not exist"},
		{"diff that does not apply", fileChangeRequest(mkChange("update", notes, "@@ -1,2 +1,2 @@\n one\n-TWO\n+three\n")), "does not apply to the file on disk"},
		{"move whose diff does not apply", fileChangeRequest(mkChange("update", notes, "@@ -5 +5 @@\n-x\n+y\n", filepath.Join(dir, "o"))), "does not apply"},
		{"diff without hunks", fileChangeRequest(mkChange("update", notes, "+one\n+two\n")), "does not apply"},
		{"move onto itself", fileChangeRequest(mkChange("update", notes, "", notes)), "onto itself"},
		// Codex does not list changes in the order it applies them: the
		// patch "add B, then move A to B" comes as the move, then the add,
		// and B ends as A.
		{"a file changed twice", fileChangeRequest(mkChange("add", missing, "v1\n"), mkChange("update", missing, "@@ -1 +1 @@\n-v1\n+v2\n")), "changed twice"},
		{"a move onto a file added too", fileChangeRequest(mkChange("update", notes, "", missing), mkChange("add", missing, "new\n")), "changed twice"},
		{"a file reached by two paths", fileChangeRequest(mkChange("add", missing, "a\n"), mkChange("add", dir+"/new/../missing", "b\n")), "changed twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := build(tc.req, Limits{ShowBytes: 1024, MaxBytes: 4096})
			var r *refusal
			if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("build = %v, want a refusal mentioning %q", err, tc.why)
			}
		})
	}
}

func TestChangedOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, absent := filepath.Join(dir, "a"), filepath.Join(dir, "absent")
	os.WriteFile(a, []byte("one\n"), 0o600)
	b, err := build(fileChangeRequest(mkChange("update", a, "@@ -1 +1 @@\n-one\n+two\n"), mkChange("add", absent, "new\n")), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func()
		want   string
	}{
		{"unchanged", func() {}, ""},
		{"rewritten with the same bytes", func() { os.WriteFile(a, []byte("one\n"), 0o600) }, ""},
		{"content changed", func() { os.WriteFile(a, []byte("one!\n"), 0o600) }, a},
		{"removed", func() { os.Remove(a) }, a},
		{"replaced by a link", func() { os.Remove(a); os.Symlink(dir, a) }, a},
		{"an absent file appeared", func() { os.WriteFile(absent, nil, 0o600) }, absent},
	} {
		os.Remove(a)
		os.Remove(absent)
		os.WriteFile(a, []byte("one\n"), 0o600)
		tc.change()
		if got := changedOnDisk(b.files, DefaultLimits.MaxBytes); got != tc.want {
			t.Errorf("%s: changedOnDisk = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestFileChangesWhereTheyLand: a path is judged where the system really
// puts it (a folder on the way is a link, or a ".." follows a folder codex
// will create).
func TestFileChangesWhereTheyLand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ws, ssh := filepath.Join(dir, "ws"), filepath.Join(dir, "ssh")
	for _, d := range []string{ws, ssh} {
		os.Mkdir(d, 0o700)
	}
	rc := filepath.Join(dir, ".bashrc")
	os.WriteFile(rc, []byte("mine\n"), 0o600)
	keys := filepath.Join(ssh, "authorized_keys")
	os.WriteFile(keys, []byte("ssh-ed25519 AAAAmine me\n"), 0o600)
	os.Symlink(ssh, filepath.Join(ws, "link"))
	for _, tc := range []struct {
		name, path, diff string
		really           string // the line that names where a link on the way leads
	}{
		{"dot-dot after a missing folder", filepath.Join(ws, "missing") + "/../../.bashrc", "@@ -1 +1 @@\n-mine\n+evil\n", ""},
		{"a folder on the way is a link", filepath.Join(ws, "link", "authorized_keys"), "@@ -1 +1 @@\n-ssh-ed25519 AAAAmine me\n+evil\n",
			"*** " + filepath.Join(ws, "link", "authorized_keys") + " is really " + keys + ": a directory on its way is a symbolic link\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := build(fileChangeRequest(mkChange("add", tc.path, "evil\n")), DefaultLimits)
			if err != nil {
				t.Fatal(err)
			}
			want := FileChange{Path: tc.path, Kind: "add", Replaces: true}
			if len(b.card.Changes) != 1 || b.card.Changes[0] != want {
				t.Fatalf("changes %+v, want %+v", b.card.Changes, want)
			}
			head := tc.really + "*** add " + tc.path + " (replaces an existing file)\n"
			if b.card.Diff != head+tc.diff {
				t.Errorf("diff:\n%s\nwant:\n%s", b.card.Diff, head+tc.diff)
			}
		})
	}
}

func TestLanding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "d"), 0o700)
	os.Symlink(filepath.Join(dir, "d"), filepath.Join(dir, "link"))
	for in, want := range map[string]string{
		dir + "/a..b":             dir + "/a..b",
		dir + "/new..dir/x":       dir + "/new..dir/x",
		dir + "/d/./x":            dir + "/d/x",
		dir + "//d/x":             dir + "/d/x",
		dir + "/no/such/../../x":  dir + "/x",
		dir + "/link/x":           dir + "/d/x",
		dir + "/no/../link/x":     dir + "/d/x",
		dir + "/link/../x":        dir + "/x",
		dir + "/no/such/dir/x..y": dir + "/no/such/dir/x..y",
	} {
		if got, err := landing(in); err != nil || got != want {
			t.Errorf("landing(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestAFolderSwappedForALinkIsAChange: the sandbox can replace a folder of
// the workspace by a link to anywhere between the card and the yes; the
// re-read sees that the path now lands elsewhere, even where no file is.
func TestAFolderSwappedForALinkIsAChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, out := filepath.Join(dir, "ws", "d"), filepath.Join(dir, "home")
	os.MkdirAll(d, 0o700)
	os.Mkdir(out, 0o700)
	path := filepath.Join(d, "authorized_keys2")
	b, err := build(fileChangeRequest(mkChange("add", path, "ssh-ed25519 AAAAevil x\n")), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := changedOnDisk(b.files, DefaultLimits.MaxBytes); got != "" {
		t.Fatalf("%s reads as changed", got)
	}
	os.Rename(d, d+".old")
	os.Symlink(out, d)
	if got := changedOnDisk(b.files, DefaultLimits.MaxBytes); got != path {
		t.Errorf("changedOnDisk = %q after the folder became a link, want %q", got, path)
	}
}
