int m3(int x) { return x + 1; }
