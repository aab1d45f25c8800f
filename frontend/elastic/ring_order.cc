#include "frontend/elastic/ring_order.h"

#include <algorithm>
#include <numeric>

namespace plexus::elastic {
namespace {

double Total(const std::vector<int>& order, const BandwidthMatrix& bandwidth) {
  double total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    total += bandwidth[order[i]][order[(i + 1) % order.size()]];
  }
  return total;
}

bool Better(const std::vector<int>& a, const std::vector<int>& b, const BandwidthMatrix& bw) {
  const double x = Bottleneck(a, bw), y = Bottleneck(b, bw);
  if (x != y) return x > y;
  return Total(a, bw) > Total(b, bw);
}

// From `start`, always on to the fastest link to a member not visited yet.
std::vector<int> Greedy(int start, const BandwidthMatrix& bandwidth) {
  const int n = static_cast<int>(bandwidth.size());
  std::vector<int> order = {start};
  std::vector<bool> used(n, false);
  used[start] = true;
  while (static_cast<int>(order.size()) < n) {
    int next = -1;
    for (int j = 0; j < n; ++j) {
      if (!used[j] && (next < 0 || bandwidth[order.back()][j] > bandwidth[order.back()][next])) {
        next = j;
      }
    }
    used[next] = true;
    order.push_back(next);
  }
  std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
  return order;
}

}  // namespace

double Bottleneck(const std::vector<int>& order, const BandwidthMatrix& bandwidth) {
  if (order.size() < 2) return 0;
  double slowest = bandwidth[order[0]][order[1]];
  for (size_t i = 0; i < order.size(); ++i) {
    slowest = std::min(slowest, bandwidth[order[i]][order[(i + 1) % order.size()]]);
  }
  return slowest;
}

std::vector<int> BestRing(const BandwidthMatrix& bandwidth) {
  const int n = static_cast<int>(bandwidth.size());
  std::vector<int> best(n);
  std::iota(best.begin(), best.end(), 0);
  if (n < 3) return best;  // One ring only.
  if (n <= kExhaustiveRingSize) {
    std::vector<int> order = best;
    while (std::next_permutation(order.begin() + 1, order.end())) {
      if (Better(order, best, bandwidth)) best = order;
    }
    return best;
  }
  for (int start = 0; start < n; ++start) {
    std::vector<int> order = Greedy(start, bandwidth);
    if (Better(order, best, bandwidth)) best = order;
  }
  return best;
}

}  // namespace plexus::elastic
