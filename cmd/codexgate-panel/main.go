// Command codexgate-panel is Codexgate's panel: the Fyne window with the
// open cards, their forms and buttons, and the workers. Codexgate starts it
// on demand with its end of a private socketpair as file descriptor 3, and
// it ends when its window closes or Codexgate goes away. It is the only
// part of Codexgate that links Fyne and OpenGL: a process that waits for
// cards must not wake 60 times a second.
//
// Usage (by codexgate only): codexgate-panel
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"codexgate/ui/panel"
	"codexgate/ui/panel/wire"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "codexgate-panel:", err)
		os.Exit(1)
	}
}

func run() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("process", "panel")
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display (neither DISPLAY nor WAYLAND_DISPLAY is set)")
	}
	f := os.NewFile(wire.FD, "codexgate")
	conn, err := net.FileConn(f)
	if err != nil {
		return fmt.Errorf("the channel to codexgate (fd %d): %w; the panel is started by codexgate", wire.FD, err)
	}
	f.Close()
	defer conn.Close()

	a := fyneapp.NewWithID("io.codexgate.app") // as FyneApp.toml
	a.SetIcon(panel.AppIcon)
	client := wire.NewClient(conn)
	p := panel.New(a, panel.Remote{C: client, Log: log})
	// Updates are read once Fyne's loop runs: a fyne.Do before it is lost.
	a.Lifecycle().SetOnStarted(func() {
		go func() {
			err := client.Run(
				func(s wire.State) { fyne.Do(func() { p.Update(s) }) },
				func(s wire.Show) { fyne.Do(func() { p.Show(s) }) },
			)
			if err != nil {
				log.Error("channel to codexgate", "err", err)
			}
			fyne.Do(a.Quit) // codexgate is gone
		}()
	})
	p.Window().Show()
	a.Run()
	return nil
}
