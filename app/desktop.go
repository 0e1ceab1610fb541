package app

import (
	"context"
	"log/slog"

	"github.com/gen2brain/beeep"

	"codexgate/assets"
	"codexgate/config"
	"codexgate/sessionbus"
	"codexgate/ui"
	"codexgate/ui/hotkey"
	"codexgate/ui/notify"
)

// desktop is the tray, notifications, hotkeys and on-demand panel of a run
// that is not headless. None of it links Fyne: the panel is a process of
// its own.
type desktop struct {
	ui       *ui.UI
	notifier *notify.Notifier
	hotkeys  hotkey.Keys
}

func newDesktop(ctx context.Context, a *app, cfg *config.Config, log *slog.Logger) *desktop {
	d := &desktop{}
	beeep.AppName = "Codexgate"
	d.notifier = notify.New(notify.Options{
		Bus:       sessionbus.Address(),
		Queue:     a.queue,
		OpenPanel: func(cardID string) { d.ui.OpenPanelSoon(cardID) },
		Fallback:  func(title, body string) error { return beeep.Notify(title, body, assets.AppIcon) },
		Turns:     cfg.Notifications.Turns,
		Log:       log,
	})
	d.hotkeys = hotkey.Choose(cfg.Hotkeys.Map(),
		func(name string) { d.ui.Hotkey(name) },
		func(err error) {
			d.notifier.Say("Global hotkeys are not available",
				err.Error()+"\nBind `codexgate answer allow` and `codexgate answer deny` in your desktop's shortcut settings instead.")
		}, log)
	d.ui = ui.New(ctx, a, ui.Options{
		Notifier: d.notifier,
		Hotkeys:  d.hotkeys,
		Log:      log,
	})
	return d
}

// reload applies new hotkeys, settle delay and notification settings.
func (d *desktop) reload(cfg *config.Config) {
	d.hotkeys.SetKeys(cfg.Hotkeys.Map())
	d.ui.Changed() // the panel learns the settle delay with the state
	d.notifier.SetTurns(cfg.Notifications.Turns)
}

// run shows the desktop until the person quits or ctx ends; then it cancels
// ctx through stop, so the rest of the app stops too.
func (d *desktop) run(ctx context.Context, stop context.CancelFunc) {
	go d.notifier.Run(ctx)
	d.ui.Run(ctx, stop)
	stop()
	d.hotkeys.Close()
}
