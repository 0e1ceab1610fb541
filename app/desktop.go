package app

import (
	"context"
	"log/slog"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"
	"github.com/gen2brain/beeep"

	"codexgate/assets"
	"codexgate/config"
	"codexgate/ui"
	"codexgate/ui/hotkey"
	"codexgate/ui/notify"
)

// desktop is the tray, panel, notifications and hotkeys of a run that is
// not headless.
type desktop struct {
	fyne     fyne.App
	ui       *ui.UI
	notifier *notify.Notifier
	hotkeys  *hotkey.Manager
}

func newDesktop(a *app, cfg *config.Config, log *slog.Logger) *desktop {
	d := &desktop{fyne: fyneapp.NewWithID("io.codexgate.app")}
	d.fyne.SetIcon(ui.AppIcon)
	beeep.AppName = "Codexgate"
	d.notifier = notify.New(func(title, body string) error { return beeep.Notify(title, body, assets.AppIcon) }, log)
	d.hotkeys = hotkey.New(cfg.Hotkeys.Map(),
		func(name string) { d.ui.Hotkey(name) },
		func(err error) {
			d.notifier.Say("Global hotkeys are not available",
				err.Error()+"\nBind `codexgate answer allow` and `codexgate answer deny` in your desktop's shortcut settings instead.")
		}, log)
	d.ui = ui.New(d.fyne, a, ui.Options{
		SettleDelay: cfg.Cards.SettleDelay.Duration,
		Notifier:    d.notifier,
		Hotkeys:     d.hotkeys,
		Log:         log,
	})
	return d
}

// reload applies new hotkeys and settle delay.
func (d *desktop) reload(cfg *config.Config) {
	d.hotkeys.SetKeys(cfg.Hotkeys.Map())
	d.ui.SetSettleDelay(cfg.Cards.SettleDelay.Duration)
}

// run shows the desktop until the person quits or ctx ends; then it cancels
// ctx through stop, so the rest of the app stops too.
func (d *desktop) run(ctx context.Context, stop context.CancelFunc) {
	go d.notifier.Run(ctx)
	go d.ui.Run(ctx)
	go func() {
		<-ctx.Done()
		fyne.Do(d.fyne.Quit)
	}()
	d.fyne.Run()
	stop()
	d.hotkeys.Close()
}
