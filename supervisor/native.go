package supervisor

import (
	"os"
	"path/filepath"
	"strings"
)

// NativeCodex returns the native binary behind the npm package's Node
// wrapper (node_modules/.bin/codex, bin/codex.js), or path itself. On Node
// before 22.15 the wrapper spawns the native binary as a child that outlives
// a kill of the wrapper and keeps the thread's writer lock, so workers run
// the native binary directly.
func NativeCodex(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil || filepath.Base(real) != "codex.js" {
		return path
	}
	pkg := filepath.Dir(filepath.Dir(real)) // .../@openai/codex
	patterns := []string{
		filepath.Join(pkg, "node_modules", "@openai", "codex-*", "vendor", "*", "bin", "codex"),
		filepath.Join(filepath.Dir(pkg), "codex-*", "vendor", "*", "bin", "codex"),
	}
	for _, p := range patterns {
		matches, _ := filepath.Glob(p)
		for _, m := range matches {
			if info, err := os.Stat(m); err == nil && info.Mode().IsRegular() && strings.Contains(m, "vendor") {
				return m
			}
		}
	}
	return path
}
