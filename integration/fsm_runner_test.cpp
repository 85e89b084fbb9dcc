// The toolkit's driver (recipes/toolkit/fsm_runner.hpp) against a real server, at its contract
// with the recipes: an outcome the recipe does not take (it is gone: its weak owner expired
// between a give-up that found the machine done and the answer) must not leave a node behind.
// This is how a leader selector or latch closed just as its acquisition finished left its node
// until the session ended (stop 26's open issue): their answer hooks hold the recipe weakly.
#include "support/session_tools.hpp"
#include "support/servers.hpp"
#include "session_port.hpp"
#include "toolkit/cleanup.hpp"
#include "toolkit/fsm_runner.hpp"
#include "toolkit/queue_fsm.hpp"
#include "toolkit/sequence_queue.hpp"
#include "zkr/client.hpp"

#include <catch2/catch.hpp>

#include <future>

using namespace std::chrono_literals;
using zkr::test::eventually;
using zkr::test::queue_length;
using zkr::test::test_connect_string;
using zkr::test::test_options;
using zkr::test::unique_path;

namespace {

using runner = zkr::detail::fsm_runner<zkr::detail::queue_fsm>;

// Runs one exclusive acquisition on `path` whose answer hook returns `taken`; returns the node
// it acquired, once answered.
std::string acquire_with_hook(zkr::client& c, const std::string& path, bool taken) {
    auto port = zkr::detail::port_of(c);
    auto cleanup = zkr::detail::cleanup_service::of(*port);
    zkr::detail::queue_options o;
    o.path = path;
    o.kind = zkr::detail::queue_kind::exclusive;
    o.data = "runner-test";
    // Shared: the hook may still be returning from set_value when the test goes on.
    auto answered = std::make_shared<std::promise<std::string>>();
    auto node = answered->get_future();
    runner::hooks hooks;
    hooks.answer = [answered, taken](zkr::error_code, const zkr::detail::step::done* d, const zkr::detail::queue_fsm& m) {
        answered->set_value(d && d->acquired ? m.node_path() : std::string());
        return taken;
    };
    auto r = std::make_shared<runner>(port, cleanup, path, zkr::detail::queue_fsm(std::move(o), &zkr::detail::random_uuid),
                                      std::move(hooks));
    r->start(std::chrono::steady_clock::now() + 30s);
    REQUIRE(node.wait_for(30s) == std::future_status::ready);
    return node.get();
}

}  // namespace

TEST_CASE("fsm runner: an acquired outcome its recipe did not take has its node deleted", "[fsm_runner]") {
    zkr::client c(test_options(test_connect_string()));
    auto path = unique_path("runner-untaken");
    auto node = acquire_with_hook(c, path, false);
    REQUIRE_FALSE(node.empty());  // it did acquire
    // Nobody knows of the node but the runner: it must go now, not with the session.
    CHECK(eventually([&] { return queue_length(c, path) == 0; }));
}

TEST_CASE("fsm runner: an acquired outcome its recipe took keeps its node", "[fsm_runner]") {
    // The control: the delete above is the runner's doing because the outcome was not taken.
    zkr::client c(test_options(test_connect_string()));
    auto path = unique_path("runner-taken");
    auto node = acquire_with_hook(c, path, true);
    REQUIRE_FALSE(node.empty());
    CHECK(queue_length(c, path) == 1);
    CHECK(c.exists(node).exists);
    c.remove(node);
}
