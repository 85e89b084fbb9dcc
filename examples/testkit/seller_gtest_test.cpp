// Testing a service's lock-loss handling with zkr::testkit and GoogleTest
// (docs/testing-your-service.md): one ensemble for the whole suite, a chroot of its own per test.
#include "seller.hpp"

#include <zkr/testkit.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <thread>

using namespace std::chrono_literals;

class SellerTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { zk_ = std::make_unique<zkr::testkit::ensemble>(1); }
    static void TearDownTestSuite() { zk_.reset(); }

    // A client in a chroot of this test's own, with a stock of `units`.
    std::unique_ptr<zkr::client> client(int units, std::chrono::milliseconds session = 4s) {
        zkr::client_options o;
        o.connect = zkr::testkit::unique_chroot(zk_->connect_string(), "gtest");
        o.session_timeout = session;
        auto c = std::make_unique<zkr::client>(o);
        c->create("/stock", std::to_string(units), zkr::create_mode::persistent);
        return c;
    }

    static bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 20s) {
        for (auto until = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < until;
             std::this_thread::sleep_for(10ms))
            if (condition()) return true;
        return condition();
    }

    static std::unique_ptr<zkr::testkit::ensemble> zk_;
};

std::unique_ptr<zkr::testkit::ensemble> SellerTest::zk_;

TEST_F(SellerTest, SellsWhileHeldAndStopsOnceItsSessionExpires) {
    auto c = client(3);
    seller s(*c, "/stock");
    ASSERT_TRUE(s.start(10s));
    EXPECT_TRUE(s.sell());
    zkr::testkit::expire_session(*c);
    EXPECT_EQ(s.standing(), zkr::lock_state::lost);
    EXPECT_FALSE(s.sell());
    EXPECT_EQ(c->get_data("/stock").data, "2");
}

TEST_F(SellerTest, StopsWhileTheServerIsFrozenAndSellsAgainWhenItIsBack) {
    auto c = client(3, 8s);
    seller s(*c, "/stock");
    ASSERT_TRUE(s.start(10s));
    zk_->freeze(0);  // a server's long GC pause: the session is not lost, only uncertain
    ASSERT_TRUE(eventually([&] { return s.standing() == zkr::lock_state::uncertain; }));
    EXPECT_FALSE(s.sell());
    zk_->thaw(0);
    EXPECT_TRUE(eventually([&] { return s.sell(); }));
    EXPECT_EQ(s.losses(), 0);
}
