// Command codexgate-hotkey grabs global hotkeys for Codexgate and prints
// "down NAME" for each press. It is a process of its own because the X11
// hotkey library panics at start without a display, exits when another
// program holds the key, and cannot release a key until it is pressed: here
// those failures end only this helper, and Codexgate releases the keys by
// ending it.
//
// Usage: codexgate-hotkey NAME=KEYS... (KEYS such as ctrl+alt+y)
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync"

	"golang.design/x/hotkey"

	"codexgate/config/keys"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: codexgate-hotkey NAME=KEYS...")
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex // protects out
	for _, arg := range os.Args[1:] {
		name, spec, ok := strings.Cut(arg, "=")
		combo, err := keys.Parse(spec)
		if !ok || err != nil {
			fmt.Fprintf(os.Stderr, "bad hotkey %q: %v\n", arg, err)
			os.Exit(2)
		}
		var mods []hotkey.Modifier
		for _, m := range combo.Mods {
			mods = append(mods, hotkey.Modifier(m))
		}
		// NumLock adds Mod2 to every press on most keyboards: grab both.
		for _, mods := range [][]hotkey.Modifier{mods, append(mods, hotkey.Modifier(keys.ModNum))} {
			hk := hotkey.New(mods, hotkey.Key(combo.Key))
			if err := hk.Register(); err != nil {
				fmt.Fprintf(os.Stderr, "register %s: %v\n", spec, err)
				os.Exit(1)
			}
			go func() {
				for range hk.Keydown() {
					mu.Lock()
					fmt.Fprintf(out, "down %s\n", name)
					out.Flush()
					mu.Unlock()
				}
			}()
		}
	}
	mu.Lock()
	fmt.Fprintln(out, "ready")
	out.Flush()
	mu.Unlock()
	// Codexgate ends the helper by closing its stdin (or killing it).
	bufio.NewReader(os.Stdin).ReadString('\n')
}
