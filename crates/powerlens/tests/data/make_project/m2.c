int m2(int x) { return x + 1; }
