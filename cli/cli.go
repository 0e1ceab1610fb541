package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"codexgate/app"
	"codexgate/approvals"
	"codexgate/config/secrets"
	"codexgate/control"
	"codexgate/supervisor"
)

const usage = `usage:
  codexgate [--config PATH] [--socket PATH] [--headless]   run (tray and panel; --headless: no UI)
  codexgate task WORKER PROMPT...          start a turn on a worker; prints the turn id
  codexgate cards [--json]                 open cards, oldest first
  codexgate show CARD                      a card whole, with its decisions; lets it be allowed
  codexgate answer DECISION [CARD]         allow | allow-session | deny (the turn goes on) |
                                           stop (deny and stop the turn), and allow-prefix,
                                           allow-host, deny-host where offered. A yes needs the
                                           card shown in full (codexgate show CARD or the
                                           panel); without CARD it answers the oldest, and a
                                           yes also needs it settled, short, granting nothing;
                                           --revision N names the revision seen;
                                           --value NAME=VALUE answers a question or form field
  codexgate workers [--json]               worker status (--json: with the last stderr lines)
  codexgate logs WORKER                    the last lines codex wrote to stderr
  codexgate restart WORKER                 restart a worker (also a failed one)
  codexgate panel [CARD]                   open the panel (at a card)
  codexgate secret set NAME                store a secret in the OS keyring, read from stdin
  codexgate secret rm NAME                 remove it
  codexgate secret list                    the names of the stored secrets
  codexgate login | logout                 the OpenAI API key in the OS keyring; running
                                           workers restart with it
  codexgate version
`

// Build names the running binary's version and the pinned codex it was
// built with.
type Build struct {
	Version string
	Codex   string
}

type globalFlags struct {
	config   string
	socket   string
	headless bool
}

// Run runs the command line args (without the program name).
func Run(args []string, build Build) error {
	var g globalFlags
	fs := flag.NewFlagSet("codexgate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.config, "config", "", "config file")
	fs.StringVar(&g.socket, "socket", "", "control socket")
	fs.BoolVar(&g.headless, "headless", false, "run without the desktop UI")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Print(usage)
			return nil
		}
		return fmt.Errorf("%w\n%s", err, usage)
	}
	args = fs.Args()
	if len(args) == 0 {
		return app.Run(app.Options{Config: g.config, Socket: g.socket, Headless: g.headless, Version: build.Version, Codex: build.Codex})
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "version":
		fmt.Println("codexgate", build.Version)
		return nil
	case "help":
		fmt.Print(usage)
		return nil
	case "task":
		return cmdTask(g, args)
	case "cards":
		return cmdCards(g, args)
	case "show":
		return cmdShow(g, args)
	case "answer":
		return cmdAnswer(g, args)
	case "workers":
		return cmdWorkers(g, args)
	case "logs":
		return cmdLogs(g, args)
	case "restart":
		if len(args) != 1 {
			return errors.New("usage: codexgate restart WORKER")
		}
		if err := g.call(control.Request{Op: "restart", Worker: args[0]}, nil); err != nil {
			return err
		}
		fmt.Printf("%s is restarting; `codexgate workers` shows when it is ready.\n", args[0])
		return nil
	case "panel":
		return g.call(control.Request{Op: "panel", Card: strings.Join(args, "")}, nil)
	case "secret":
		return cmdSecret(args)
	case "login":
		return cmdLogin(g, args)
	case "logout":
		return cmdLogout(g, args)
	}
	return fmt.Errorf("unknown command %q\n%s", cmd, usage)
}

func (g globalFlags) socketPath() (string, error) {
	if g.socket != "" {
		return g.socket, nil
	}
	return control.DefaultPath()
}

// call sends a request to the running app and decodes its result into out.
func (g globalFlags) call(req control.Request, out any) error {
	path, err := g.socketPath()
	if err != nil {
		return err
	}
	raw, err := control.Call(path, req, time.Minute)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// subFlags parses a subcommand's flags, which may come before or after its
// arguments.
func subFlags(name string, args []string, define func(*flag.FlagSet)) ([]string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	define(fs)
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func cmdTask(g globalFlags, args []string) error {
	if len(args) < 2 {
		return errors.New("usage: codexgate task WORKER PROMPT...")
	}
	var turn string
	if err := g.call(control.Request{Op: "task", Worker: args[0], Prompt: strings.Join(args[1:], " ")}, &turn); err != nil {
		return err
	}
	fmt.Println(turn)
	return nil
}

func cmdWorkers(g globalFlags, args []string) error {
	var asJSON bool
	if _, err := subFlags("workers", args, func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "") }); err != nil {
		return err
	}
	var reply control.WorkersReply
	if err := g.call(control.Request{Op: "workers"}, &reply); err != nil {
		return err
	}
	workers := reply.Workers
	if reply.ConfigError != "" {
		out := os.Stdout
		if asJSON {
			out = os.Stderr // stdout stays one JSON document
		}
		fmt.Fprintf(out, "config not applied (running on the last good one):\n%s\n\n", reply.ConfigError)
	}
	if asJSON {
		type withStderr struct {
			supervisor.Status
			Stderr []string `json:"stderr"`
			// Turn is the current or last turn; null when there was none.
			Turn *control.TurnState `json:"turn"`
		}
		out := make([]withStderr, len(workers))
		for i, w := range workers {
			out[i] = withStderr{Status: w, Stderr: reply.Stderr[w.Name]}
			if ts, ok := reply.Turns[w.Name]; ok {
				out[i].Turn = &ts
			}
			if out[i].Stderr == nil {
				out[i].Stderr = []string{}
			}
		}
		return printJSON(out)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tTHREAD\tCWD\tLAST ERROR")
	for _, w := range workers {
		// The last column, so a long error costs no alignment; a refusal
		// ends with what to do, which a shorter cap would cut.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Name, w.State, orDash(w.ThreadID), w.Cwd, approvals.OneLine(w.LastError, 400))
	}
	return tw.Flush()
}

// cmdLogs prints what a worker's codex last wrote to stderr, escaped: it
// is codex's text, and may hold terminal controls.
func cmdLogs(g globalFlags, args []string) error {
	if len(args) != 1 {
		return errors.New("usage: codexgate logs WORKER")
	}
	var reply control.WorkersReply
	if err := g.call(control.Request{Op: "workers"}, &reply); err != nil {
		return err
	}
	if !slices.ContainsFunc(reply.Workers, func(w supervisor.Status) bool { return w.Name == args[0] }) {
		return fmt.Errorf("no worker named %q", args[0])
	}
	lines := reply.Stderr[args[0]]
	if len(lines) == 0 {
		fmt.Fprintf(os.Stderr, "%s's codex has written nothing to stderr.\n", args[0])
	}
	for _, line := range lines {
		fmt.Println(approvals.Escape(line, false))
	}
	return nil
}

func cmdCards(g globalFlags, args []string) error {
	var asJSON bool
	if _, err := subFlags("cards", args, func(fs *flag.FlagSet) { fs.BoolVar(&asJSON, "json", false, "") }); err != nil {
		return err
	}
	var cards []approvals.Card
	if err := g.call(control.Request{Op: "cards"}, &cards); err != nil {
		return err
	}
	if asJSON {
		if cards == nil {
			cards = []approvals.Card{}
		}
		return printJSON(cards)
	}
	if len(cards) == 0 {
		fmt.Println("no open cards")
		return nil
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CARD\tREV\tKIND\tDECISIONS\tWHAT")
	for _, c := range cards {
		what := c.Summary(120)
		if c.Truncated {
			what += " [truncated: codexgate show " + c.ID + "]"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", c.ID, c.Revision, c.Kind, joinDecisions(c.Decisions), what)
	}
	return tw.Flush()
}

func joinDecisions(ds []approvals.Decision) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = string(d)
	}
	return strings.Join(s, ",")
}

// values collects repeated --value NAME=VALUE flags.
type values map[string]string

func (v values) String() string { return "" }

func (v values) Set(s string) error {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", s)
	}
	v[name] = value
	return nil
}

func cmdAnswer(g globalFlags, args []string) error {
	var revision int
	vals := values{}
	rest, err := subFlags("answer", args, func(fs *flag.FlagSet) {
		fs.IntVar(&revision, "revision", 0, "")
		fs.Var(vals, "value", "")
	})
	if err != nil {
		return err
	}
	if len(rest) < 1 || len(rest) > 2 {
		return errors.New("usage: codexgate answer DECISION [CARD] [--revision N] [--value NAME=VALUE]...")
	}
	if _, err := approvals.ParseDecision(rest[0]); err != nil {
		return err
	}
	req := control.Request{Op: "answer", Decision: rest[0], Revision: revision, Values: vals}
	if len(rest) == 2 {
		req.Card = rest[1]
	}
	var sent approvals.Answered
	if err := g.call(req, &sent); err != nil {
		return err
	}
	fmt.Printf("%s %s (%s, revision %d): sent %s\n", sent.Card.ID, sent.Decision, sent.Card.DecisionLabel(sent.Decision), sent.Card.Revision, sent.Reply)
	return nil
}

// cmdShow prints a card whole: its id, revision and decisions, and every
// byte of its escaped text. The app records that it was shown in full.
func cmdShow(g globalFlags, args []string) error {
	if len(args) != 1 || args[0] == "" {
		return errors.New("usage: codexgate show CARD")
	}
	var r control.ShowReply
	if err := g.call(control.Request{Op: "show", Card: args[0]}, &r); err != nil {
		return err
	}
	c := r.Card
	var out strings.Builder
	fmt.Fprintf(&out, "card %s · revision %d · %s · %d bytes, shown whole\n\n", c.ID, c.Revision, c.Kind, len(r.Text))
	if !c.ShownInFull {
		fmt.Fprintln(os.Stderr, "Not recorded as shown: the card holds right-to-left text, which a terminal may lay out in another order than it runs. Allow it from the panel.")
	}
	out.WriteString(r.Text)
	if !strings.HasSuffix(r.Text, "\n") {
		out.WriteString("\n")
	}
	out.WriteString("\ndecisions:\n")
	tw := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	for _, d := range c.Decisions {
		fmt.Fprintf(tw, "  %s\t%s\n", d, c.DecisionLabel(d))
	}
	tw.Flush()
	rev := ""
	if c.Revision != 1 {
		rev = fmt.Sprintf(" --revision %d", c.Revision)
	}
	fmt.Fprintf(&out, "\nanswer with: codexgate answer DECISION %s%s\n", c.ID, rev)
	_, err := io.WriteString(os.Stdout, out.String())
	return err
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdSecret(args []string) error {
	const use = "usage: codexgate secret set NAME | rm NAME | list"
	switch {
	case len(args) == 1 && args[0] == "list":
		names, err := secrets.List()
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Println(n)
		}
		return nil
	case len(args) == 2 && args[0] == "rm":
		return secrets.Delete(args[1])
	case len(args) == 2 && args[0] == "set":
		if err := secrets.ValidName(args[1]); err != nil {
			return err
		}
		value, err := readSecret(args[1])
		if err != nil {
			return err
		}
		return secrets.Set(args[1], value)
	}
	return errors.New(use)
}

// readSecret reads a value from standard input: without echo from a
// terminal, else the whole input less one trailing newline.
func readSecret(name string) (string, error) {
	if term.IsTerminal(int(os.Stdin.Fd())) {
		fmt.Fprintf(os.Stderr, "Value of %s (not shown): ", name)
		raw, err := term.ReadPassword(int(os.Stdin.Fd()))
		fmt.Fprintln(os.Stderr)
		return string(raw), err
	}
	raw, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read the secret: %w", err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(raw), "\n"), "\r"), nil
}

// cmdLogin stores the OpenAI API key and, when Codexgate runs, restarts the
// workers with it and reports whether each accepted it.
func cmdLogin(g globalFlags, args []string) error {
	if len(args) != 0 {
		return errors.New("usage: codexgate login (the key is read from stdin)")
	}
	key, err := readSecret(supervisor.APIKeySecret)
	if err != nil {
		return err
	}
	if err := secrets.Set(supervisor.APIKeySecret, strings.TrimSpace(key)); err != nil {
		return err
	}
	fmt.Println("The API key is in the OS keyring.")
	return g.relogin()
}

func cmdLogout(g globalFlags, args []string) error {
	if len(args) != 0 {
		return errors.New("usage: codexgate logout")
	}
	if err := secrets.Delete(supervisor.APIKeySecret); err != nil {
		return err
	}
	fmt.Println("The API key is removed from the OS keyring.")
	return g.relogin()
}

// relogin restarts the workers so that they pick up the key, and reports
// what became of each.
func (g globalFlags) relogin() error {
	var results []control.ReloginResult
	if err := g.call(control.Request{Op: "relogin"}, &results); err != nil {
		fmt.Printf("No worker was restarted (%v); workers read the keyring when they start.\n", err)
		return nil
	}
	var failed []string
	for _, r := range results {
		why := approvals.OneLine(r.Error, 200)
		switch {
		case !r.Restarted:
			fmt.Printf("%s: not restarted (%s)\n", r.Name, why)
		case r.State == supervisor.StateIdle:
			fmt.Printf("%s: %s (restarted)\n", r.Name, r.State)
		default:
			fmt.Printf("%s: %s (restarted): %s\n", r.Name, r.State, why)
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("not every restarted worker is ready: %s", strings.Join(failed, ", "))
	}
	return nil
}
