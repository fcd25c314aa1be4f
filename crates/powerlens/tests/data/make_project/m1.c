int m1(int x) { return x + 1; }
