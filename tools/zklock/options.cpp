#include "options.hpp"

#include "duration.hpp"
#include "exit_codes.hpp"
#include "signals.hpp"

#include <zkr/path.hpp>
#include <zkr/version.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <sstream>

namespace zklock {
namespace po = boost::program_options;
namespace {

constexpr const char* overview = R"(zklock - ZooKeeper locks for shell scripts and operators (zkr's locks, wire-compatible
with Apache Curator's InterProcessReadWriteLock, and semaphores, with InterProcessSemaphoreV2).

Usage:
  zklock run [--shared | --max N] [--timeout D] [options] PATH -- COMMAND [ARGS...]
  zklock status [--json] [--max N] [options] PATH
  zklock watch [--json] [--count N] [options] PATH
  zklock tree [--watch [--count N]] [--depth N] [--json] [options] PATH
  zklock release-stale --session ID [--yes] [options] PATH
  zklock COMMAND --help | zklock --help | zklock --version

Commands:
  run            take the lock on PATH, run COMMAND, release the lock when it exits (like flock(1));
                 with --max N, a lease of a semaphore of N instead: at most N run at once
  status         show PATH's queue: holders first, then waiters; a semaphore's leases
  watch          show the queue again on every change, until interrupted
  tree           show the subtree at PATH (every node, its data and stat); with --watch, then
                 every change, as a zkr::tree_cache sees it
  release-stale  remove the lock nodes of one session (for operators; asks for --yes)
)";

// Columns of the option tables in --help.
constexpr unsigned help_width = 100;

constexpr const char* duration_help =
    "Durations: 500ms, 10s, 2m, 1h; a bare number is seconds (1.5 = 1500ms).\n";

// --- option value types, validated by Program_options (so its messages name the option) ---

struct duration_value {
    std::chrono::milliseconds value{};
};
struct signal_value {
    int number = 0;
};
struct max_value {
    int leases = 0;
};

class invalid_value : public po::error_with_option_name {
public:
    invalid_value(const std::string& token, const std::string& expected)
        : po::error_with_option_name("the argument ('%value%') for option '%canonical_option%' is invalid: " + expected) {
        set_substitute("value", token);
    }
};

void validate(boost::any& out, const std::vector<std::string>& values, duration_value*, int) {
    po::validators::check_first_occurrence(out);
    const std::string& token = po::validators::get_single_string(values);
    auto parsed = parse_duration(token);
    if (!parsed) throw invalid_value(token, "expected a duration such as 500ms, 10s or 2m");
    out = duration_value{*parsed};
}

void validate(boost::any& out, const std::vector<std::string>& values, signal_value*, int) {
    po::validators::check_first_occurrence(out);
    const std::string& token = po::validators::get_single_string(values);
    auto parsed = parse_signal(token);
    if (!parsed) throw invalid_value(token, "expected a signal name or number such as TERM, INT or 9");
    out = signal_value{*parsed};
}

void validate(boost::any& out, const std::vector<std::string>& values, max_value*, int) {
    po::validators::check_first_occurrence(out);
    const std::string& token = po::validators::get_single_string(values);
    int leases = 0;
    auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), leases);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size() || leases < 1)
        throw invalid_value(token, "expected a number of leases, at least 1");
    out = max_value{leases};
}

// --- the options of each subcommand ---

po::options_description connection_description() {
    po::options_description d("Connection options", help_width, help_width / 2);
    d.add_options()
        ("connect", po::value<std::string>()->value_name("HOSTS"),
         "the ensemble: host:port[,host:port...][/chroot] (default: $ZK_CONNECT)")
        ("auth", po::value<std::vector<std::string>>()->value_name("USER:PASSWORD")->composing(),
         "digest credentials added to the session; repeatable (default: $ZK_AUTH, one USER:PASSWORD)")
        ("session-timeout", po::value<duration_value>()->value_name("D")->default_value({std::chrono::seconds(10)}, "10s"),
         "ZooKeeper session timeout to ask for")
        ("verbose", "show zkr's and the ZooKeeper C client's warnings on stderr")
        ("help,h", "show this help");
    return d;
}

struct parsed_args {
    po::variables_map values;
    bool help = false;
};

// Parses `args` with `visible` + `hidden` options; positional arguments go to `positional`.
parsed_args parse_args(const std::string& command, const std::vector<std::string>& args,
                       const po::options_description& visible, const po::options_description& hidden,
                       const po::positional_options_description& positional) {
    po::options_description all;
    all.add(visible).add(hidden);
    parsed_args out;
    try {
        po::store(po::command_line_parser(args)
                      .options(all)
                      .positional(positional)
                      .style(po::command_line_style::unix_style & ~po::command_line_style::allow_guessing)
                      .run(),
                  out.values);
        po::notify(out.values);
    } catch (const po::error& e) {
        throw failure(exit_code::usage, command + ": " + e.what() + " (see 'zklock " + command + " --help')");
    }
    out.help = out.values.count("help") > 0;
    return out;
}

std::string help_text(const std::string& usage, const std::string& summary,
                      const std::vector<const po::options_description*>& sections) {
    std::ostringstream out;
    out << "Usage: " << usage << "\n\n" << summary << "\n";
    for (const auto* section : sections) out << "\n" << *section;
    out << "\n" << duration_help << "\nExit status:\n" << exit_code_table();
    return out.str();
}

std::string required_path(const std::string& command, const po::variables_map& values, const std::string& what = "lock path") {
    if (!values.count("path"))
        throw failure(exit_code::usage, command + ": no " + (what == "lock path" ? "lock PATH" : "PATH") + " given (see 'zklock " + command + " --help')");
    std::string path = values["path"].as<std::string>();
    if (std::string problem = zkr::path_problem(path); !problem.empty())
        throw failure(exit_code::usage, command + ": invalid " + what + " \"" + path + "\": " + problem);
    if (path == "/")
        throw failure(exit_code::usage, command + ": invalid " + what + " \"/\": the root cannot be a " + what);
    return path;
}

zkr::digest_credentials parse_credentials(const std::string& command, const std::string& text, const char* origin) {
    auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0)
        throw failure(exit_code::usage, command + ": " + origin + " must be USER:PASSWORD, got \"" + text + "\"");
    return {text.substr(0, colon), text.substr(colon + 1)};
}

connection_options connection_from(const std::string& command, const po::variables_map& values) {
    connection_options c;
    if (values.count("connect")) c.connect = values["connect"].as<std::string>();
    else if (const char* env = std::getenv("ZK_CONNECT"); env != nullptr) c.connect = env;
    if (c.connect.empty())
        throw failure(exit_code::usage, command + ": no ensemble given: use --connect HOSTS or set ZK_CONNECT");
    if (values.count("auth")) {
        for (const auto& text : values["auth"].as<std::vector<std::string>>())
            c.auth.push_back(parse_credentials(command, text, "--auth"));
    } else if (const char* env = std::getenv("ZK_AUTH"); env != nullptr && *env != '\0') {
        c.auth.push_back(parse_credentials(command, env, "ZK_AUTH"));
    }
    c.session_timeout = values["session-timeout"].as<duration_value>().value;
    c.verbose = values.count("verbose") > 0;
    return c;
}

po::options_description timeout_option(const char* what) {
    po::options_description d("Options", help_width, help_width / 2);
    d.add_options()("timeout", po::value<duration_value>()->value_name("D")->default_value({std::chrono::seconds(15)}, "15s"),
                    what);
    return d;
}

// --- subcommands ---

command_line parse_run(const std::vector<std::string>& all_args) {
    // Everything after the first "--" is the command, whatever it looks like.
    auto separator = std::find(all_args.begin(), all_args.end(), "--");
    std::vector<std::string> args(all_args.begin(), separator);
    std::vector<std::string> after_separator;
    if (separator != all_args.end()) after_separator.assign(separator + 1, all_args.end());

    po::options_description own("Options", help_width, help_width / 2);
    own.add_options()
        ("shared", "take the lock shared (its read side) instead of exclusive (its write side)")
        ("max", po::value<max_value>()->value_name("N"),
         "take a lease of a semaphore of N instead of the lock (like consul lock -n): at most N "
         "commands run at once; all runs on PATH must give the same N")
        ("timeout", po::value<duration_value>()->value_name("D"),
         "give up waiting for the lock (or lease) after D, counted once connected (exit 75); 0: take "
         "it only if it is free at once, like flock -n; default: wait as long as it takes")
        ("connect-timeout", po::value<duration_value>()->value_name("D")->default_value({std::chrono::seconds(15)}, "15s"),
         "give up when no connection comes within D (exit 69), whatever --timeout is")
        ("lost-signal", po::value<signal_value>()->value_name("SIG")->default_value({SIGTERM}, "TERM"),
         "signal sent to COMMAND's process group when the lock (or lease) is lost while it runs, or zklock "
         "ends before it")
        ("grace", po::value<duration_value>()->value_name("D")->default_value({std::chrono::seconds(10)}, "10s"),
         "then SIGKILL after D to what is still running");
    auto connection = connection_description();
    po::options_description hidden;
    hidden.add_options()
        ("path", po::value<std::string>())
        ("command", po::value<std::vector<std::string>>());
    po::positional_options_description positional;
    positional.add("path", 1).add("command", -1);

    po::options_description visible;
    visible.add(own).add(connection);
    // Help is only looked for before the "--": after it, --help belongs to the command.
    auto parsed = parse_args("run", args, visible, hidden, positional);
    {
        if (parsed.help)
            return print_and_exit{help_text(
                "zklock run [options] PATH -- COMMAND [ARGS...]",
                "Takes the lock on PATH (a zkr::shared_mutex: its write side, or its read side with\n"
                "--shared), runs COMMAND (no shell), releases the lock when it exits, and exits with its\n"
                "status (128+N if it died of signal N). COMMAND's environment gets ZKLOCK_PATH, ZKLOCK_NODE\n"
                "(our lock node) and ZKLOCK_FENCING_TOKEN (its czxid: ensemble-wide and increasing).\n"
                "\n"
                "With --max N it takes a lease of a semaphore of N on PATH instead (a zkr::semaphore,\n"
                "wire-compatible with Curator's InterProcessSemaphoreV2: PATH/locks, PATH/leases), like\n"
                "consul lock -n: at most N commands run at once. ZKLOCK_NODE is then our lease node.\n"
                "Everything below holds for the lease as for the lock: --timeout, signals, and a lease\n"
                "lost (its session ended, or its node was deleted) ends COMMAND and exits 70.\n"
                "\n"
                "COMMAND runs in a process group of its own, which gets every signal that would end zklock\n"
                "(SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGIO,\n"
                "SIGPWR, SIGSTKFLT, the real-time signals; Ctrl-C and Ctrl-\\ at a terminal too). While\n"
                "zklock still waits for the lock, such a signal cancels the wait instead (no lock node is\n"
                "left) and zklock exits 128+N. Ctrl-Z stops COMMAND's group and zklock, and fg continues\n"
                "both, as with any job; a COMMAND that reads the terminal is given it.\n"
                "\n"
                "If the lock is lost while COMMAND runs (the session expired, or its node was deleted), its\n"
                "group gets --lost-signal, then SIGKILL after --grace, and zklock exits 70. If zklock itself\n"
                "ends while COMMAND runs (kill -9, the OOM killer, a crash, SIGPIPE), a watchdog process\n"
                "does the same, so that nothing runs on without the lock. Not covered: a zklock frozen or\n"
                "stopped (SIGSTOP) for longer than its session timeout, its command running on meanwhile;\n"
                "and processes that leave the group (setsid, setpgid: daemons, interactive shells). What\n"
                "COMMAND leaves running in the group when it exits runs on, without the lock.",
                {&own, &connection})};
    }
    run_options o;
    o.path = required_path("run", parsed.values);
    bool command_before_separator = parsed.values.count("command") > 0;
    if (command_before_separator && separator != all_args.end())
        throw failure(exit_code::usage, "run: give the command after \"--\" only (see 'zklock run --help')");
    o.command = command_before_separator ? parsed.values["command"].as<std::vector<std::string>>() : after_separator;
    if (o.command.empty())
        throw failure(exit_code::usage, "run: no COMMAND given after \"--\" (see 'zklock run --help')");
    o.connection = connection_from("run", parsed.values);
    o.shared = parsed.values.count("shared") > 0;
    if (parsed.values.count("max")) o.max_leases = parsed.values["max"].as<max_value>().leases;
    // A semaphore has no read side: --shared would be silently ignored.
    if (o.shared && o.max_leases)
        throw failure(exit_code::usage, "run: --shared and --max do not go together (see 'zklock run --help')");
    if (parsed.values.count("timeout")) o.timeout = parsed.values["timeout"].as<duration_value>().value;
    o.connect_timeout = parsed.values["connect-timeout"].as<duration_value>().value;
    o.lost_signal = parsed.values["lost-signal"].as<signal_value>().number;
    o.grace = parsed.values["grace"].as<duration_value>().value;
    return o;
}

po::options_description path_only() {
    po::options_description hidden;
    hidden.add_options()("path", po::value<std::string>());
    return hidden;
}

command_line parse_status(const std::vector<std::string>& args) {
    auto own = timeout_option("give up after D when the ensemble does not answer (exit 69)");
    own.add_options()
        ("json", "print one JSON object: {\"path\": ..., \"nodes\": [...]}")
        ("max", po::value<max_value>()->value_name("N"),
         "for a semaphore: its maximum, to show \"K of N leases held\" (the nodes do not record it)");
    auto connection = connection_description();
    po::options_description visible;
    visible.add(own).add(connection);
    po::positional_options_description positional;
    positional.add("path", 1);
    auto parsed = parse_args("status", args, visible, path_only(), positional);
    if (parsed.help)
        return print_and_exit{help_text(
            "zklock status [options] PATH",
            "Shows the queue of the lock on PATH: holders first, then waiters, each with its node,\n"
            "sequence, reader or writer, owner (host, pid and thread for zkr's nodes; other clients'\n"
            "node data, quoted), session id (the node's ephemeral owner) and age. Reads zkr's, Curator's\n"
            "(InterProcessMutex, InterProcessReadWriteLock) and kazoo's (Lock, ReadLock, WriteLock) nodes.\n"
            "\n"
            "A semaphore's PATH (one with a \"leases\" child: 'zklock run --max', zkr::semaphore,\n"
            "Curator's InterProcessSemaphoreV2) shows its leases instead: each lease node with its\n"
            "state, sequence, owner, session and age, how many are held (\"K of N leases held\" with\n"
            "--max N), and how many runs wait in the queue of its mutex PATH/locks. The one holding that\n"
            "mutex has made its lease node before counting: while it waits, that node \"waits\".\n"
            "\n"
            "Text from ZooKeeper (node data, owner fields, node names) is escaped, so that each node\n"
            "takes one line and nothing in it acts on the terminal: \\\" and \\\\ for a quote and a\n"
            "backslash, \\n \\r \\t, and \\xNN for each byte of a control character (C0, DEL, C1,\n"
            "Unicode's bidirectional and line separator controls) or of anything that is not\n"
            "well-formed UTF-8; other UTF-8 text as is. --json gives the data unescaped, as JSON that is\n"
            "valid (and UTF-8) whatever the bytes: a byte that is not UTF-8 as \\u00XX, its Latin-1 reading.",
            {&own, &connection})};
    status_options o;
    o.path = required_path("status", parsed.values);
    o.connection = connection_from("status", parsed.values);
    o.json = parsed.values.count("json") > 0;
    if (parsed.values.count("max")) o.max_leases = parsed.values["max"].as<max_value>().leases;
    o.timeout = parsed.values["timeout"].as<duration_value>().value;
    return o;
}

command_line parse_watch(const std::vector<std::string>& args) {
    auto own = timeout_option("give up a reading of the queue after D when the ensemble does not answer (exit 69)");
    own.add_options()
        ("json", "print each status as one JSON object on one line")
        ("count", po::value<int>()->value_name("N"), "exit after N changes (the first status not counted)");
    auto connection = connection_description();
    po::options_description visible;
    visible.add(own).add(connection);
    po::positional_options_description positional;
    positional.add("path", 1);
    auto parsed = parse_args("watch", args, visible, path_only(), positional);
    if (parsed.help)
        return print_and_exit{help_text(
            "zklock watch [options] PATH",
            "Shows the status of the lock on PATH (see 'zklock status --help'), then again on every\n"
            "change of its queue, as ZooKeeper's watches report them (no polling). Runs until\n"
            "interrupted (SIGINT, SIGTERM or SIGHUP: exit 0), or until --count changes were shown.",
            {&own, &connection})};
    watch_options o;
    o.path = required_path("watch", parsed.values);
    o.connection = connection_from("watch", parsed.values);
    o.json = parsed.values.count("json") > 0;
    o.timeout = parsed.values["timeout"].as<duration_value>().value;
    if (parsed.values.count("count")) {
        o.count = parsed.values["count"].as<int>();
        if (*o.count < 1) throw failure(exit_code::usage, "watch: --count must be at least 1");
    }
    return o;
}

command_line parse_tree(const std::vector<std::string>& args) {
    auto own = timeout_option("give up the first reading of the subtree after D when the ensemble does not answer (exit 69)");
    own.add_options()
        ("watch", "after the subtree, print every change (created, changed, deleted, initialized) until interrupted")
        ("count", po::value<int>()->value_name("N"), "with --watch: exit after N changes")
        ("depth", po::value<int>()->value_name("N"), "levels below PATH to read: 0 PATH alone, 1 its children (default: all)")
        ("json", "print each node, and each change, as one JSON object on one line");
    auto connection = connection_description();
    po::options_description visible;
    visible.add(own).add(connection);
    po::positional_options_description positional;
    positional.add("path", 1);
    auto parsed = parse_args("tree", args, visible, path_only(), positional);
    if (parsed.help)
        return print_and_exit{help_text(
            "zklock tree [--watch [--count N]] [--depth N] [--json] [options] PATH",
            "Reads the subtree at PATH (a zkr::tree_cache) and prints one line per node, depth first\n"
            "in name order: the path, its data (escaped as in 'zklock status'; long data cut at 64\n"
            "bytes), its size, mzxid and, for an ephemeral node, its session. A PATH that does not\n"
            "exist prints nothing. With --watch it goes on printing every change the cache sees\n"
            "(\"created PATH DATA\", \"changed ...\", \"deleted PATH\", and \"initialized\" after a\n"
            "new session's resync), driven by ZooKeeper's watches (no polling), until interrupted\n"
            "(SIGINT, SIGTERM or SIGHUP: exit 0) or --count changes.",
            {&own, &connection})};
    tree_options o;
    o.path = required_path("tree", parsed.values, "subtree path");
    o.connection = connection_from("tree", parsed.values);
    o.json = parsed.values.count("json") > 0;
    o.watch = parsed.values.count("watch") > 0;
    o.timeout = parsed.values["timeout"].as<duration_value>().value;
    if (parsed.values.count("depth")) {
        o.depth = parsed.values["depth"].as<int>();
        if (o.depth < 0) throw failure(exit_code::usage, "tree: --depth must be 0 or more");
    }
    if (parsed.values.count("count")) {
        if (!o.watch) throw failure(exit_code::usage, "tree: --count counts changes: it needs --watch");
        o.count = parsed.values["count"].as<int>();
        if (*o.count < 1) throw failure(exit_code::usage, "tree: --count must be at least 1");
    }
    return o;
}

std::int64_t parse_session_id(const std::string& text) {
    std::string_view digits = text;
    if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) digits.remove_prefix(2);
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, 16);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
        throw failure(exit_code::usage, "release-stale: --session \"" + text +
                                            "\" is not a session id (hexadecimal, as 'zklock status' shows it)");
    if (value == 0)
        throw failure(exit_code::usage, "release-stale: --session 0 is no session (persistent nodes have owner 0)");
    return static_cast<std::int64_t>(value);
}

command_line parse_release_stale(const std::vector<std::string>& args) {
    auto own = timeout_option("give up after D when the ensemble does not answer (exit 69)");
    own.add_options()
        ("session", po::value<std::string>()->value_name("ID"),
         "the session whose lock nodes go: hexadecimal, with or without 0x (as 'zklock status' shows it)")
        ("yes", "remove them; without it, only list them and exit 1");
    auto connection = connection_description();
    po::options_description visible;
    visible.add(own).add(connection);
    po::positional_options_description positional;
    positional.add("path", 1);
    auto parsed = parse_args("release-stale", args, visible, path_only(), positional);
    if (parsed.help)
        return print_and_exit{help_text(
            "zklock release-stale --session ID [--yes] [options] PATH",
            "Removes the lock nodes under PATH whose ephemeral owner is session ID, for a holder that\n"
            "hangs with its session alive. Without --yes it lists them, removes nothing and exits 1.\n"
            "The owner of a removed node still believes it holds the lock: its fencing token is how\n"
            "a resource turns it away.",
            {&own, &connection})};
    release_stale_options o;
    o.path = required_path("release-stale", parsed.values);
    if (!parsed.values.count("session"))
        throw failure(exit_code::usage, "release-stale: --session ID is required (see 'zklock release-stale --help')");
    o.session = parse_session_id(parsed.values["session"].as<std::string>());
    o.connection = connection_from("release-stale", parsed.values);
    o.yes = parsed.values.count("yes") > 0;
    o.timeout = parsed.values["timeout"].as<duration_value>().value;
    return o;
}

std::string general_help() { return std::string(overview) + "\n" + duration_help + "\nExit status:\n" + exit_code_table(); }

}  // namespace

command_line parse_command_line(int argc, const char* const* argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) throw failure(exit_code::usage, "no command given (see 'zklock --help')");
    const std::string command = args.front();
    args.erase(args.begin());
    if (command == "--version" || command == "-V") return print_and_exit{std::string("zklock ") + zkr::version() + "\n"};
    if (command == "--help" || command == "-h") return print_and_exit{general_help()};
    if (command == "help") {
        if (args.empty()) return print_and_exit{general_help()};
        return parse_command_line(3, std::vector<const char*>{argv[0], args.front().c_str(), "--help"}.data());
    }
    if (command == "run") return parse_run(args);
    if (command == "status") return parse_status(args);
    if (command == "watch") return parse_watch(args);
    if (command == "tree") return parse_tree(args);
    if (command == "release-stale") return parse_release_stale(args);
    throw failure(exit_code::usage, "unknown command \"" + command + "\" (commands: run, status, watch, tree, release-stale; see 'zklock --help')");
}

}  // namespace zklock
