int big(void);
int main(void) { return big() & 1; }
