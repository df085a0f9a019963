// What `edgeform --help` lists for each subcommand: its name, its term (usage) and its
// description, as the subcommand's own module makes them. The listing is printed from this
// table so that `edgeform --help` loads no subcommand's module (1 CPU s instead of about 0.1,
// issue 29); test/unit/cli-launch.test.ts checks it against what the modules add, and says to
// update it here when a command's description, options or arguments change.
export const COMMAND_LIST: [name: string, term: string, description: string][] = [
  ["serve", "serve [options]", "Run the API server. Applies pending migrations and, on an empty database, creates the admin user and its first API key."],
  ["agent", "agent [options] [type] [address]", "Connect to an edgeform server and serve tunnels: labeled ones (--label, --forwards-to) for tunnel-group backends, or an ephemeral one (http 3000)."],
  ["validate", "validate [options]", "Check manifests offline: kinds, names, every field against the catalog, references and natural keys."],
  ["plan", "plan [options]", "Show what apply would change: live state read through list endpoints, diffed field by field."],
  ["apply", "apply [options] [plan-file]", "Make the API calls that bring live state to the manifests (or carry out a saved plan)."],
  ["destroy", "destroy [options]", "Delete every resource this stack manages (prevent_destroy in the manifests blocks it)."],
  ["export", "export [options]", "Write manifests for live resources, so that plan on them right away shows no changes."],
  ["reconcile", "reconcile [options]", "Reconcile continuously: plan and apply on an interval and on every manifest change, repairing drift (a long-lived service)."],
  ["admin", "admin", "Operator commands run on the server's machine, with its database settings instead of an API key."],
  ["backup", "backup [options] <file>", "Write a consistent copy of the server's database to FILE, while the server runs: every write acknowledged before the backup began is in it. SQLite: a snapshot of the database file (VACUUM INTO); PostgreSQL: pg_dump in its custom format. The secret key is not in the backup: keep it too, apart."],
  ["restore", "restore [options] <file>", "Replace the server's database with a backup made by edgeform backup. Refused while a server runs on the database: stop every instance first. The server then starts on it with the key the backup was taken under."],
  ["force-unlock", "force-unlock [options] <stack> <lock-id>", "Release a stack's lock left by a run that is gone (a killed CI job). Only when no run holds it any more: two runs at once may duplicate resources."],
  ["policy", "policy", "Work with traffic-policy documents: test one offline, or show a route as the policy the ingress runs for it."],
  ["version", "version [options]", "Print the version of edgeform, the API version it speaks, and the Node.js and platform it runs on."],
  ["completion", "completion <shell>", "Print a shell completion script for commands and flags.\n\n  bash:  source <(edgeform completion bash)        (or write it to /etc/bash_completion.d/edgeform)\n  zsh:   edgeform completion zsh > \"${fpath[1]}/_edgeform\"\n  fish:  edgeform completion fish > ~/.config/fish/completions/edgeform.fish"],
];
