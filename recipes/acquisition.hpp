// One acquisition in flight: runs an acquire_fsm against the client. Its steps run inline on
// the thread that completes each request (often the C client's completion thread: a hand-off
// costs no thread hop); they never block and never call user code. Its deadline runs on the
// session thread. The caller is answered once: with the hold, or at the deadline or
// cancellation at the latest, while the cleanup of a given-up attempt goes on in the background.
#pragma once

#include "lock_engine.hpp"

namespace zkr::detail {

class acquisition : public std::enable_shared_from_this<acquisition> {
public:
    acquisition(std::shared_ptr<lock_engine> engine, acquire_options options, std::uint64_t owner, bool async_owned,
                lock_engine::done_fn done);

    void start(std::optional<std::chrono::steady_clock::time_point> deadline);
    /// Answers the caller now with `reason` (unless it was answered already) and cleans up.
    void give_up(error_code reason);

private:
    using action = acquire_fsm::action;

    template <class Event>
    void feed(Event&& event);
    void run(action a);
    void send(const step::create_and_list& s, client_impl& c);
    void send(const step::watch& s, client_impl& c);
    void on_watch_fired(const watch_state* fired, bool child_watch, error_code ec, const watch_event& ev);
    void mark_holding(const std::string& node_path);
    void finish(const step::done& d);
    bool answer(error_code ec, std::shared_ptr<hold> h);
    std::int64_t session() const;

    std::shared_ptr<lock_engine> engine_;
    std::weak_ptr<client_impl> client_;
    const std::string lock_path_, owner_data_;
    const lock_kind kind_;
    const std::uint64_t owner_;
    const bool async_owned_;
    acquire_fsm fsm_;

    std::mutex mutex_;  // guards everything below and the machine
    bool machine_done_ = false;
    bool answered_ = false;
    lock_engine::done_fn done_;
    // The watches of the current `watch` step still armed: its data watch and its child watch.
    // Events of any other (an earlier step's, the twin of one that fired) are not passed on.
    std::shared_ptr<watch_state> watch_, child_watch_;
    std::shared_ptr<boost::asio::steady_timer> timer_;  // armed and cancelled on the session thread
    live_counter<&live_objects::operations> counted_;
};

}  // namespace zkr::detail
