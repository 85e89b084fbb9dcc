#include "listing_coalescer.hpp"

namespace zkr::detail {

listing_coalescer::listing_coalescer(session_port& port) : port_(port.weak_port()) {}

void listing_coalescer::list(session_port& port, const std::string& path, answer_fn answer) {
    std::shared_ptr<listing_coalescer> self;
    try {
        self = per_client<listing_coalescer>(port);
    } catch (const zkr::system_error& e) {
        return answer(e.code(), listing());
    }
    self->ask(path, std::move(answer));
}

listing_coalescer::counts listing_coalescer::totals_of(session_port& port) { return per_client<listing_coalescer>(port)->totals(); }

void listing_coalescer::ask(const std::string& path, answer_fn answer) {
    ++asked_;
    {
        std::lock_guard lock(mutex_);
        auto [it, first] = in_flight_.try_emplace(path);
        if (!first) {
            // One is in flight: it may have been sent before what made us ask. Wait for the next.
            it->second.next.push_back(std::move(answer));
            return;
        }
    }
    std::vector<answer_fn> batch;
    batch.push_back(std::move(answer));
    send(path, std::move(batch));
}

void listing_coalescer::send(std::string path, std::vector<answer_fn> batch) {
    auto port = port_.lock();
    if (!port) {
        // The client is gone: whoever waits for this path hears so now.
        {
            std::lock_guard lock(mutex_);
            if (auto it = in_flight_.find(path); it != in_flight_.end()) {
                for (auto& a : it->second.next) batch.push_back(std::move(a));
                in_flight_.erase(it);
            }
        }
        for (auto& answer : batch) answer(make_error_code(errc::client_closed), listing());
        return;
    }
    ++sent_;
    // Kept alive by its request (which the session layer answers exactly once, if only with
    // client_closed): the answers queued behind it are owed too.
    port->get_children(
        path, false,
        completion<children_result>(completion<children_result>::inline_fn(
            [self = shared_from_this(), path, batch = std::move(batch)](error_code ec, children_result r) mutable {
                listing answer(ec ? std::vector<std::string>{} : std::move(r.children));
                for (auto& a : batch) a(ec, answer);
                // Whoever asked meanwhile gets a listing sent now, after what made them ask.
                std::vector<answer_fn> next;
                {
                    std::lock_guard lock(self->mutex_);
                    auto it = self->in_flight_.find(path);
                    if (it == self->in_flight_.end()) return;
                    if (it->second.next.empty()) {
                        self->in_flight_.erase(it);
                        return;
                    }
                    next = std::move(it->second.next);
                }
                self->send(std::move(path), std::move(next));
            })));
}

}  // namespace zkr::detail
