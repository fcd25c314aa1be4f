# Writes big.c: 120 small functions and one that calls them all, so that compiling it
# takes cc1 about 40 times as long as each of the project's tiny files.
N = 120
for i in range(N):
    print(f"int f{i}(int x){{int s=0;for(int k=0;k<x;k++)s+=k*{i}^(s>>3);return s;}}")
print("int big(void){int s=0;")
for i in range(N):
    print(f"s+=f{i}({i});")
print("return s;}")
